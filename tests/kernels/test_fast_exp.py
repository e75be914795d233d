"""``fast_exp``: the float32 exp every CPU path runs, against float64 numpy over float32's range.

At most ``MAX_ULP`` ulp from float64 ``np.exp`` rounded to float32 on a strided sweep of all 2^32
bit patterns (every one under ``-m slow``) and on every float32 near overflow and through the
subnormal range, with inf and 0 exactly where the rounded exp is; special values; monotone but
for steps back of ``MAX_STEP_BACK``; dtypes and ``out=`` as ``np.exp``'s.
"""

from __future__ import annotations

import numpy as np
import pytest

from dualflow.kernels.fast_math.fast_exp import MAX_STEP_BACK, MAX_ULP, exp_f32, numpy_exp
from tests.kernels.test_fast_tanh import CHUNK, _ordered, _patterns


def _check(x: np.ndarray) -> int:
    """The largest ulp distance from the reference (NaN, inf and 0 exactly where it has them)."""
    got = numpy_exp(x)
    with np.errstate(over="ignore", invalid="ignore"):
        want = np.exp(x.astype(np.float64)).astype(np.float32)
    nan = np.isnan(x)
    assert np.isnan(got[nan]).all()
    got, want = got[~nan], want[~nan]
    assert np.array_equal(np.isinf(got), np.isinf(want))
    assert np.array_equal(got == 0, want == 0)
    finite = np.isfinite(want)
    return int(np.abs(_ordered(got[finite]) - _ordered(want[finite])).max(initial=0))


def test_ulp_error_within_the_bound_on_a_strided_sweep_of_all_bit_patterns() -> None:
    step = 97
    worst = 0
    for start in range(0, 1 << 32, CHUNK * step):
        worst = max(worst, _check(_patterns(start, min(start + CHUNK * step, 1 << 32), step)))
    assert worst == MAX_ULP


@pytest.mark.slow
def test_ulp_error_within_the_bound_on_every_float32() -> None:
    worst = 0
    for start in range(0, 1 << 32, CHUNK):
        worst = max(worst, _check(_patterns(start, start + CHUNK, 1)))
    assert worst == MAX_ULP


def _between(low: float, high: float) -> np.ndarray:
    a, b = np.float32(low).view(np.int32), np.float32(high).view(np.int32)
    return np.arange(min(a, b), max(a, b) + 1, dtype=np.int32).view(np.float32)


def test_every_float32_near_overflow_and_through_the_subnormals() -> None:
    assert _check(_between(88.0, 89.0)) <= MAX_ULP  # the last finite results, then inf
    assert _check(_between(-87.0, -105.0)) <= MAX_ULP  # below 2^-126: subnormals, then 0


def test_special_values() -> None:
    x = np.array([0.0, -0.0, np.inf, -np.inf, 1e-40, -1e-40, 3.4e38, -3.4e38], np.float32)
    assert numpy_exp(x).tolist() == [1.0, 1.0, np.inf, 0.0, 1.0, 1.0, np.inf, 0.0]
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001], np.uint32).view(np.float32)
    assert np.isnan(numpy_exp(nans)).all()
    tiny = np.float32(np.finfo(np.float32).smallest_subnormal)
    assert numpy_exp(np.float32(-103.5)) == tiny and numpy_exp(np.float32(-104.0)) == 0


def test_nearly_monotone_on_a_sample_and_the_scalar_path_gives_the_loops_bits() -> None:
    x = np.sort(np.random.default_rng(0).uniform(-110, 90, 400_000).astype(np.float32))
    y = numpy_exp(x)
    assert np.diff(_ordered(y)).min() >= -MAX_STEP_BACK
    sample = x[::1999]
    scalar = np.array([exp_f32(v) for v in sample], np.float32)
    assert scalar.tobytes() == numpy_exp(sample).tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int16", "int8", "int32"])
def test_numpy_exp_types_results_as_numpy_does(dtype: str) -> None:
    x = np.arange(-3, 4).astype(dtype)
    want, got = np.exp(x), numpy_exp(x)
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype == np.float32:
        assert np.abs(_ordered(got) - _ordered(want)).max() <= MAX_ULP
    else:
        assert got.tobytes() == want.tobytes()  # numpy's own


def test_numpy_exp_out_and_layouts() -> None:
    x = np.random.default_rng(1).normal(size=(64, 48)).astype(np.float32)
    want = numpy_exp(x)
    out = np.empty_like(x)
    assert numpy_exp(x, out=out) is out and out.tobytes() == want.tobytes()
    assert numpy_exp(x[:, ::5]).tobytes() == want[:, ::5].tobytes()
    same = x.copy()
    assert numpy_exp(same, out=same) is same and same.tobytes() == want.tobytes()
    assert isinstance(numpy_exp(np.float32(1.0)), np.float32)
