"""Compiled equals eager, bit for bit, where float32 ``tanh`` and ``exp`` are dualflow's own.

Eager numpy ops run ``numpy_tanh`` / ``numpy_exp``; compiled regions with a float32 tanh or exp
now run in numba kernels that inline ``tanh_f32`` / ``exp_f32`` (float64 ones stay on the blocked
evaluator with numpy's ufuncs). Both optimization levels, both dtypes, small arrays and big ones
(the threaded paths), contiguous and strided inputs, and a backward give eager's bits.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import dualflow
from dualflow import ops
from dualflow.kernels.expr.typed_program import lower_expr
from dualflow.kernels.fast_math import float32_loops
from dualflow.kernels.fused_cpu import fused_elementwise as kc
from tests.tracer.fuzz.bits import assert_same_bits

PROGRAMS: dict[str, Callable] = {
    "tanh": lambda x: ops.tanh(x),
    "sigmoid": lambda x: ops.sigmoid(x),
    "gelu_tanh": lambda x: ops.gelu(x, approximate=True),
    "silu": lambda x: ops.silu(x),
    "chain": lambda x: ops.tanh(x * 0.5 + 1) * ops.sigmoid(x) - x**2,
    "tanh_of_tanh": lambda x: ops.tanh(ops.tanh(x) * 3.0 - 1.0) + ops.tanh(-x),
    "exp": lambda x: ops.exp(x),
    "softplus": lambda x: ops.softplus(x),
    "exp_chain": lambda x: ops.exp(x * -0.5) * ops.tanh(x) + ops.exp(ops.tanh(x)) - 1.0,
}


def _input(shape: tuple[int, ...], dtype: str, strided: bool) -> dualflow.Tensor:
    rng = np.random.default_rng(sum(shape))
    values = rng.normal(0, 4, shape).astype(dtype)
    values.reshape(-1)[:4] = [0.0, -0.0, np.inf, np.nan]
    if strided:  # a transposed view: non-contiguous operands of the fused kernel
        values = np.ascontiguousarray(values.T).T
    return dualflow.tensor(values)


@pytest.mark.parametrize("passes", ["O0", None])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_compiled_gives_eager_bits_small_and_strided(name: str, dtype: str, passes: str) -> None:
    program = PROGRAMS[name]
    compiled = dualflow.compile(program, passes=passes, fallback="error")
    for shape, strided in [((7, 33), False), ((40, 24), True), ((5,), False)]:
        x = _input(shape, dtype, strided)
        with dualflow.no_grad():
            for _ in range(2):  # the first call traces, the second runs the plan
                assert_same_bits(compiled(x).numpy(), program(x).numpy(), f"{name} {shape}")


@pytest.mark.parametrize("passes", ["O0", None])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compiled_gives_eager_bits_on_big_arrays(
    dtype: str, passes: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # >= 1M elements: threaded evaluator, and eager too (its loops split from 2 x MIN_PART)
    monkeypatch.setattr(float32_loops, "MIN_PART", 1 << 18)
    x = _input((1024, 1025), dtype, False)
    for name in ("chain", "tanh", "exp_chain"):
        program = PROGRAMS[name]
        compiled = dualflow.compile(program, passes=passes, fallback="error")
        with dualflow.no_grad():
            for _ in range(2):
                assert_same_bits(compiled(x).numpy(), program(x).numpy(), name)


def test_compiled_backward_through_tanh_gives_eager_bits() -> None:
    rng = np.random.default_rng(5)
    w = dualflow.tensor(rng.normal(size=(16, 8)).astype(np.float32), requires_grad=True)
    x = dualflow.tensor(rng.normal(size=(32, 16)).astype(np.float32))

    def step(x: dualflow.Tensor) -> dualflow.Tensor:
        w.grad = None
        loss = ops.sum(ops.sigmoid(ops.tanh(x @ w) * 2.0) + ops.softplus(x @ w))
        loss.backward()
        return w.grad

    compiled = dualflow.compile(step, fallback="error")
    want = step(x).numpy().copy()
    for _ in range(2):
        assert_same_bits(compiled(x).numpy(), want)


def test_float32_tanh_and_exp_regions_go_to_numba_float64_ones_stay_blocked() -> None:
    expr = ("call", "tanh", ("call", "multiply", ("var", "a0"), ("const", 0.5)))
    expr = ("call", "add", expr, ("call", "exp", ("var", "a0")))
    assert not kc._blocked(lower_expr(expr, ("a0",), ("float32",)))
    tanh = ("call", "tanh", ("var", "a0"))
    assert not kc._blocked(lower_expr(tanh, ("a0",), ("int16",)))  # numpy's float32 loop
    assert kc._blocked(lower_expr(expr, ("a0",), ("float64",)))
    with_log = ("call", "add", expr, ("call", "log", ("var", "a0")))
    assert kc._blocked(lower_expr(with_log, ("a0",), ("float32",)))  # log: numba's libm
