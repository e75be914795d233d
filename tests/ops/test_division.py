"""remainder, fmod and floor_divide: numpy's bits eagerly and compiled (fused with other
elementwise ops), for floats with signed zeros, infinities and NaN and for integers with zero
divisors; gradients as PyTorch's; floor_divide has none."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dualflow
from dualflow import ops

SPECIAL = [-7.5, -2.0, -1.0, -0.0, 0.0, 0.5, 1.0, 3.0, 5.25, np.inf, -np.inf, np.nan]
UFUNCS = {"remainder": np.remainder, "fmod": np.fmod, "floor_divide": np.floor_divide}


def _grid(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    if np.dtype(dtype).kind == "f":
        grid = np.array(SPECIAL, dtype)
    else:  # zero divisors and the most negative value, which numpy wraps
        grid = np.array([np.iinfo(dtype).min, -7, -3, -1, 0, 1, 2, 5, 9], dtype)
    return np.repeat(grid, len(grid)), np.tile(grid, len(grid))


def _same(got: object, want: np.ndarray) -> None:
    got = np.asarray(got.numpy() if hasattr(got, "numpy") else got)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))  # signed zeros too
    np.testing.assert_array_equal(got, want)  # NaN == NaN here


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("name", sorted(UFUNCS))
def test_eager_and_compiled_give_numpy_bits(name: str, dtype: str) -> None:
    a, b = (np.tile(v, 1000) for v in _grid(dtype))  # big enough for the fuse pass's kernels
    with np.errstate(all="ignore"):
        want = UFUNCS[name](a, b)
        fused_want = UFUNCS[name](a * 2, b) + a  # an elementwise region around the op

    def fused(x, y):
        return getattr(ops, name)(x * 2, y) + x

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's division warnings
        _same(getattr(ops, name)(a, b), want)
        compiled = dualflow.compile(fused)
        for _ in range(3):  # the trace, then plan runs (fused kernels)
            _same(compiled(dualflow.tensor(a), dualflow.tensor(b)), fused_want)
    ((trace,),) = compiled.traces.values()
    assert "fused(" in str(trace.graph) and compiled.stats().eager_fallbacks == 0


def test_integer_division_by_zero_gives_zero_with_numpys_warning() -> None:
    a, b = np.array([7, -7, 0]), np.array([0, 0, 0])
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        result = ops.remainder(a, b)
    assert result.tolist() == [0, 0, 0]


def test_promotion_follows_numpy() -> None:
    x = dualflow.tensor([5, -5], dtype=dualflow.int32)
    assert ops.remainder(x, 3).dtype == np.int32
    assert ops.floor_divide(x, 2.5).dtype == np.float64  # PyTorch: its default float32
    assert ops.fmod(x.float(), 2).dtype == np.float32


def test_gradients_are_pytorchs() -> None:
    x = dualflow.tensor([5.0, -5.0, 3.5], requires_grad=True)
    y = dualflow.tensor([2.0, 3.0, -2.0], requires_grad=True)
    (ops.remainder(x, y) * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]
    assert y.grad.tolist() == [-4.0, 4.0, 4.0]  # -2 * floor(x / y)
    x.grad = y.grad = None
    ops.fmod(x, y).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0]
    assert y.grad.tolist() == [-2.0, 1.0, 1.0]  # -trunc(x / y)


def test_floor_divide_has_no_gradient() -> None:
    x = dualflow.tensor([5.0, -5.0], requires_grad=True)
    assert not ops.floor_divide(x, 2.0).requires_grad


_values = st.floats(-50, 50, allow_nan=False, width=32)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    a=st.lists(_values, min_size=1, max_size=6),
    b=st.lists(_values.filter(lambda v: abs(v) > 1e-3), min_size=1, max_size=6),
)
def test_random_programs_compiled_equal_eager(a: list[float], b: list[float]) -> None:
    """``x % y - (x // y) * fmod(x, y)`` on random float32 values: compiled bits == eager."""
    n = min(len(a), len(b))
    x, y = np.array(a[:n], np.float32), np.array(b[:n], np.float32)

    def program(x, y):
        return x % y - (x // y) * ops.fmod(x, y)

    eager = program(dualflow.tensor(x), dualflow.tensor(y))
    compiled = dualflow.compile(program)
    for _ in range(2):
        _same(compiled(dualflow.tensor(x), dualflow.tensor(y)), eager.numpy())
