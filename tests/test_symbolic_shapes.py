"""SymInt arithmetic, simplification and guards (dualflow/symbolic_shapes.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualflow.symbolic_containers import hint_of, substitute
from dualflow.symbolic_shapes import ShapeEnv, SymInt, as_shape


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
    assert n != 1 and n != -1 and n >= 0 and (n == 0) is False
    assert env.guards == []  # symbols stand for sizes >= 2
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
