"""Flat fused kernels split over the native crew give the bits of one call, for any split, dtype,
constant, one-element input and in-place (donated) output; the compile worker stores their
native functions; a compiled training step whose updates split there equals eager."""

from __future__ import annotations

import threading

import numba
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import dualflow
from dualflow.background import process
from dualflow.kernels.base import native_crew
from dualflow.kernels.base.machine_constants import PART_MIN_FLOOR
from dualflow.kernels.expr.typed_program import lower_expr
from dualflow.kernels.numba import kernel_requests, native_split, numba_elementwise

pytestmark = pytest.mark.skipif(not native_crew._SUPPORTED, reason="Linux x86-64/aarch64 only")
X, Y = ("var", "a0"), ("var", "a1")
MODEL = numba_elementwise._model_module  # the negation the split model is measured on
EXPRESSIONS = {
    "affine": ("call", "add", ("call", "multiply", X, ("const", 0.5)), Y),
    "tanh": ("call", "tanh", ("call", "subtract", X, Y)),
    "divide": ("call", "divide", X, Y),  # zeros below: inf and NaN
    "where": ("call", "where", ("call", "greater", X, Y), X, ("call", "negative", Y)),
}


def _inputs(dtype: str, size: int, one: bool, rng: np.random.Generator) -> list[np.ndarray]:
    x = (rng.standard_normal(size) * 4).astype(dtype)
    y = (rng.standard_normal(1 if one else size) * 4).astype(dtype)
    x[::7], y[::11] = 0, 0
    return [x, y]


class Splits:
    """Counts the calls that ran on the native crew (``native_split.run``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls, real = 0, native_split.run

        def counted(*args):
            self.calls += 1
            return real(*args)

        monkeypatch.setattr(native_split, "run", counted)


def _one_then_split(monkeypatch, call):
    # one part (the crew off); then parts on the crew whether it lingers or sleeps
    monkeypatch.setattr(native_crew, "_enabled", False)
    one = call()
    monkeypatch.setattr(native_crew, "_enabled", True)
    monkeypatch.setattr(numba_elementwise, "PART_MIN", 8)
    monkeypatch.setattr(native_split, "_split_model", lambda crew, model: (0.0, 1.0))
    return one, call()


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(sorted(EXPRESSIONS)),
    dtype=st.sampled_from(["float32", "float64"]),
    size=st.sampled_from([12_288, 12_289, 20_001, 65_537]),  # 3 parts of PART_MIN_FLOOR
    one=st.booleans(),
    donated=st.booleans(),
    threads=st.sampled_from([2, 3]),
)
def test_native_parts_give_the_bits_of_one_call(name, dtype, size, one, donated, threads) -> None:
    assume(name != "tanh" or dtype == "float32")  # numba's tanh kernel is float32's alone
    with pytest.MonkeyPatch.context() as monkeypatch, process.using_threads(threads):
        splits = Splits(monkeypatch)
        x, y = _inputs(dtype, size, one, np.random.default_rng(size))
        program = lower_expr(EXPRESSIONS[name], ("a0", "a1"), (dtype, dtype))
        kernel = numba_elementwise.numba_kernel(program, (x.shape, y.shape), x.shape)

        def call() -> np.ndarray:
            if not donated or program.dtype != np.dtype(dtype):
                return kernel(np, x, y)
            target = x.copy()
            return kernel(np, target, y, out=target)  # out is input 0's very array

        with np.errstate(all="ignore"):
            whole, parts = _one_then_split(monkeypatch, call)
        assert splits.calls >= 1
        assert whole.tobytes() == parts.tobytes()


def test_integer_and_bool_operands_split_too(monkeypatch: pytest.MonkeyPatch) -> None:
    splits = Splits(monkeypatch)
    rng = np.random.default_rng(3)
    x = rng.integers(-100, 100, 30_000)
    flag = rng.random(30_000) > 0.5
    expr = ("call", "where", ("var", "a1"), ("call", "multiply", X, ("const", 3)), X)
    program = lower_expr(expr, ("a0", "a1"), ("int64", "bool"))
    kernel = numba_elementwise.numba_kernel(program, (x.shape, flag.shape), x.shape)
    whole, parts = _one_then_split(monkeypatch, lambda: kernel(np, x, flag))
    assert splits.calls == 1 and whole.tobytes() == parts.tobytes()
    assert parts.tolist() == np.where(flag, x * 3, x).tolist()


def test_calls_from_two_threads_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # one holds the threads, the other runs its call alone: both right
    monkeypatch.setattr(numba_elementwise, "PART_MIN", 8)
    program = lower_expr(EXPRESSIONS["affine"], ("a0", "a1"), ("float32", "float32"))
    x, y = _inputs("float32", 100_000, False, np.random.default_rng(4))
    kernel = numba_elementwise.numba_kernel(program, (x.shape, y.shape), x.shape)
    want = kernel(np, x, y)
    wrong = []

    def many() -> None:
        for _ in range(200):
            if kernel(np, x, y).tobytes() != want.tobytes():
                wrong.append(1)

    threads = [threading.Thread(target=many) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong


def test_the_compile_worker_stores_the_native_functions() -> None:
    request = ("?", EXPRESSIONS["tanh"], ("a0", "a1"), ("float32",) * 2, ((9000,),) * 2)
    program = lower_expr(EXPRESSIONS["tanh"], ("a0", "a1"), ("float32",) * 2)
    source = numba_elementwise.render_source(program, (True, True))[0]
    stem = numba_elementwise.stem(source)
    kernel_requests.build((stem, *request[1:], (9000,), "map", None))
    module = numba_elementwise.load_module(source)
    assert module.split.signatures and module.entry.signatures


def test_a_compiled_step_with_native_updates_equals_eager(monkeypatch: pytest.MonkeyPatch) -> None:
    splits = Splits(monkeypatch)
    monkeypatch.setattr(numba_elementwise, "PART_MIN", 8)
    monkeypatch.setattr(native_split, "_split_model", lambda crew, model: (0.0, 1.0))

    def run(compiled: bool) -> list[np.ndarray]:
        dualflow.random.seed(0)
        model = dualflow.nn.Sequential(
            dualflow.nn.Linear(256, 128), dualflow.nn.Tanh(), dualflow.nn.Linear(128, 10)
        )
        opt = dualflow.optim.Adam(model.parameters(), lr=1e-2)
        x = dualflow.tensor(np.random.default_rng(1).standard_normal((128, 256), np.float32))

        def step():
            opt.zero_grad()
            loss = (model(x) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        fn = dualflow.compile(step) if compiled else step
        for _ in range(4):
            fn()
        return [p.numpy().copy() for p in model.parameters()]

    eager, compiled = run(False), run(True)
    assert splits.calls > 0
    assert all(a.tobytes() == b.tobytes() for a, b in zip(eager, compiled))


def test_native_functions_numba_cannot_compile_leave_the_call_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def untyped(dispatcher):
        raise numba.core.errors.TypingError("an operand type carray lacks")

    monkeypatch.setattr(native_crew, "entry_address", untyped)
    splits = Splits(monkeypatch)
    # an expression of its own: the module keeps its entry point (0 here) for the process
    expr = ("call", "divide", ("call", "add", X, ("const", 7.0)), Y)
    program = lower_expr(expr, ("a0", "a1"), ("float64", "float64"))
    x, y = _inputs("float64", 40_000, False, np.random.default_rng(5))
    kernel = numba_elementwise.numba_kernel(program, (x.shape, y.shape), x.shape)
    with np.errstate(all="ignore"):
        whole, parts = _one_then_split(monkeypatch, lambda: kernel(np, x, y))
    assert splits.calls == 1 and whole.tobytes() == parts.tobytes()


def test_the_split_model_is_measured_holding_the_threads() -> None:
    with process.using_threads(2):  # a fresh crew: nothing measured yet
        crew = native_crew.crew()
        with crew.lock:  # another call holds the threads: no model now, nothing kept
            assert native_split._split_model(crew, MODEL) is None
        cost, per_element = native_split._split_model(crew, MODEL)
        assert 0.0 <= cost < 1e-3 and 0.0 < per_element < 1e-7  # microseconds; nanoseconds
        assert native_split._split_model(crew, MODEL) == (cost, per_element)  # kept by the crew
        # a copy-like kernel splits only where its elements repay the split: half the break-even
        below = int(cost / (per_element * 0.5) / 2)
        if below >= 2 * PART_MIN_FLOOR:
            assert native_split.splits(below, 1.0, 1 << 40, MODEL) is None
