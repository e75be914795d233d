"""SymInt arithmetic, simplification and guards (dualflow/symbolic_shapes.py)."""

from __future__ import annotations

import math
import operator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualflow.symbolic_containers import as_shape, hint_of, substitute
from dualflow.symbolic_shapes import ShapeEnv, SymInt


def test_arithmetic_simplifies_and_evaluates() -> None:
    env = ShapeEnv()
    n = env.new_symbol(32)
    m = (n * 784) // 784
    assert m.expr == "s0" and env.guards == []
    conv = (n + 2 * 1 - 3) // 2 + 1
    assert conv.hint == (32 - 1) // 2 + 1
    assert substitute(conv, {"s0": 9}) == (9 - 1) // 2 + 1
    assert ((n * 16) % 16) == 0 and env.guards == []  # a constant: no guard


def test_comparisons_record_guards_except_where_sizes_decide() -> None:
    env = ShapeEnv()
    n = env.new_symbol(5)
    assert n != -1 and n >= 0 and (n == 0) is False
    assert env.guards == []  # the same for every size >= 1: no guard
    assert n != 1  # traced at 5, so not 1; at 1 it would go the other way: guarded
    assert env.failing({"s0": 1}) == "s0 - 1 != 0" and env.failing({"s0": 2}) is None
    env.guards.clear()
    assert n > 4
    assert env.failing({"s0": 6}) is None
    assert env.failing({"s0": 3}) == "s0 - 4 > 0"


def test_every_escape_to_a_plain_value_is_guarded() -> None:
    for escape in (int, float, hash, str, repr, lambda v: range(v), np.zeros, lambda v: f"{v}"):
        env = ShapeEnv()
        escape(env.new_symbol(7))
        assert env.failing({"s0": 7}) is None
        assert env.failing({"s0": 8}) is not None, escape


def test_hints_and_shapes() -> None:
    env = ShapeEnv()
    n = env.new_symbol(3)
    assert hint_of({"shape": (n, -1), "k": [n * 2]}) == {"shape": (3, -1), "k": [6]}
    assert as_shape(n)[0] is n and as_shape(np.int64(4)) == (4,)
    assert env.guards == []


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 50),
    st.integers(2, 50),
    st.lists(st.tuples(st.sampled_from("+-*/%"), st.integers(1, 9)), max_size=6),
)
def test_random_expressions_evaluate_as_python_ints(hint: int, other: int, steps: list) -> None:
    env = ShapeEnv()
    value: SymInt | int = env.new_symbol(hint)
    plain = hint
    replay = other
    for op, k in steps:
        apply = {
            "+": lambda a, k=k: a + k,
            "-": lambda a, k=k: a - k,
            "*": lambda a, k=k: a * k,
            "/": lambda a, k=k: a // k,
            "%": lambda a, k=k: a % k,
        }[op]
        value, plain, replay = apply(value), apply(plain), apply(replay)
    got = value.hint if isinstance(value, SymInt) else value
    assert got == plain
    if isinstance(value, SymInt):
        assert substitute(value, {"s0": other}) == replay


def test_non_int_operands_take_the_concrete_value() -> None:
    env = ShapeEnv()
    n = env.new_symbol(4)
    assert n / 2 == 2.0 and n * 0.5 == 2.0
    with pytest.raises(ZeroDivisionError):
        _ = 1 // (n - n)


def test_a_size_left_behind_after_its_trace_is_its_traced_value() -> None:
    env = ShapeEnv()
    n = env.new_symbol(6)
    env.closed = True
    assert int(n) == 6 and n > 3 and str(n) == "6" and env.guards == []


_FLOAT_STEPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "sub", "mul", "truediv", "radd", "rsub", "rmul", "rtruediv"]),
        st.one_of(st.integers(1, 9), st.floats(0.01, 4.0), st.sampled_from(["n", "n-1"])),
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=80, deadline=None)
@given(
    steps=_FLOAT_STEPS, first=st.floats(0.01, 2.0), sizes=st.lists(st.integers(2, 90), min_size=2)
)
def test_float_arithmetic_on_sizes_replays_python_exactly(steps, first, sizes) -> None:
    # batch norm's ``momentum * n / (n - 1)``: the plan must compute each call's float exactly
    # as Python does (bit for bit), in the same order
    def run(n):
        value = first * n
        for how, operand in steps:
            other = n if operand == "n" else n - 1 if operand == "n-1" else operand
            name = how.lstrip("r") if how != "rsub" else "sub"
            fn = getattr(operator, name if name != "truediv" else "truediv")
            value = fn(other, value) if how.startswith("r") else fn(value, other)
        return value

    env = ShapeEnv()
    symbolic = run(env.new_symbol(sizes[0]))
    assert env.guards == []
    for size in sizes:
        want = run(size)
        assert symbolic.value_for({"s0": size}) == want or (want != want)
    assert symbolic.hint == run(sizes[0]) or symbolic.hint != symbolic.hint


_OPERATIONS = {
    "int": [
        lambda v: v**2,
        lambda v: 2**v,
        lambda v: abs(v),
        lambda v: -v,
        lambda v: +v,
        lambda v: ~v,
        lambda v: v << 1,
        lambda v: v >> 1,
        lambda v: v & 3,
        lambda v: v | 1,
        lambda v: v ^ 1,
        lambda v: divmod(v, 4),
        lambda v: divmod(13, v),
        lambda v: round(v),
        lambda v: math.floor(v),
        lambda v: math.ceil(v),
        lambda v: math.trunc(v),
        lambda v: int(v),
        lambda v: float(v),
        lambda v: complex(v),
        lambda v: v.bit_length(),
        lambda v: math.sqrt(v),
        lambda v: max(v, 3),
        lambda v: min(v, 3),
        lambda v: v % 4,
        lambda v: 13 % v,
        lambda v: v // 4,
        lambda v: 13 // v,
        lambda v: v * 1.5,
        lambda v: 1.5 * v,
        lambda v: v + 0.5,
        lambda v: v - 0.5,
        lambda v: 0.5 - v,
        lambda v: v / 4,
        lambda v: 3 / v,
        lambda v: v == 6.0,
        lambda v: v < 6.5,
        lambda v: operator.index(v),
        lambda v: range(v)[-1],
        lambda v: [0] * v,
        lambda v: "ab" * v,
        lambda v: v.real,
        lambda v: v.numerator,
        lambda v: v.conjugate(),
        lambda v: pow(v, 2, 5),
        lambda v: format(v, "03d"),
        lambda v: f"{v}",
        lambda v: str(v),
        lambda v: hash(v) == hash(6),
        lambda v: bool(v),
        lambda v: sum([v, v]),
        lambda v: math.prod([v, 2]),
    ],
    "float": [
        lambda v: v**2,
        lambda v: 2**v,
        lambda v: abs(v),
        lambda v: -v,
        lambda v: +v,
        lambda v: divmod(v, 0.5),
        lambda v: round(v),
        lambda v: round(v, 1),
        lambda v: math.floor(v),
        lambda v: math.ceil(v),
        lambda v: math.trunc(v),
        lambda v: int(v),
        lambda v: float(v),
        lambda v: v % 0.4,
        lambda v: v // 0.4,
        lambda v: 3 // v,
        lambda v: 3 % v,
        lambda v: v * 2,
        lambda v: v + 1,
        lambda v: 1 - v,
        lambda v: v / 3,
        lambda v: 3 / v,
        lambda v: v == 1.5,
        lambda v: v != 1.5,
        lambda v: v < 2,
        lambda v: v >= 1.5,
        lambda v: math.sqrt(v),
        lambda v: math.exp(v),
        lambda v: v.is_integer(),
        lambda v: v.real,
        lambda v: v.hex(),
        lambda v: format(v, ".2f"),
        lambda v: f"{v}",
        lambda v: str(v),
        lambda v: bool(v),
        lambda v: max(v, 1.0),
        lambda v: isinstance(v, float),
        lambda v: v.as_integer_ratio(),
    ],
}


@pytest.mark.parametrize("kind", ["int", "float"])
def test_every_int_and_float_operation_works_on_sizes_as_on_plain_numbers(kind) -> None:
    # whatever Python can do with an int (a float), a size (a float from sizes) does too, with
    # the same result: as an expression, or as the traced call's value, guarded
    env = ShapeEnv()
    n = env.new_symbol(6)
    symbolic, plain = (n, 6) if kind == "int" else (n / 4, 1.5)
    for i, fn in enumerate(_OPERATIONS[kind]):
        want, got = fn(plain), fn(symbolic)
        if isinstance(want, range):
            continue
        got = tuple(getattr(g, "hint", g) for g in got) if type(got) is tuple else got
        got = getattr(got, "hint", got)
        assert got == want and type(got) is type(want), (kind, i, want, got)
