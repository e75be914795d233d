"""``fast_tanh``: the float32 tanh every CPU path runs, against float64 numpy over float32's range.

Its error is at most ``MAX_ULP`` ulp from float64 ``np.tanh`` rounded to float32 on a strided
sweep of all 2^32 bit patterns (every one under ``-m slow``); special values are exact; it is
odd, monotone but for steps back of at most ``MAX_STEP_BACK`` ulp, saturates to ±1 exactly; and
``numpy_tanh`` is ``np.tanh``'s drop-in (dtypes, scalars, ``out=``, layouts, aliasing, threads).
"""

from __future__ import annotations

import numpy as np
import pytest

from dualflow.kernels.fast_math import float32_loops
from dualflow.kernels.fast_math.fast_tanh import (
    MAX_STEP_BACK,
    MAX_ULP,
    SATURATE,
    numpy_tanh,
    tanh_f32,
)
from dualflow.ops.registry import OPS

CHUNK = 1 << 22


def _ordered(values: np.ndarray) -> np.ndarray:
    """float32 bits as integers in the order of the values (±0 both 0): ulp distance is a
    difference."""
    bits = values.view(np.int32).astype(np.int64)
    return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)


def _reference(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.tanh(x.astype(np.float64)).astype(np.float32)


def _max_ulp(x: np.ndarray) -> int:
    """The largest ulp distance from the reference over non-NaN ``x`` (NaN must give NaN)."""
    got, want = numpy_tanh(x), _reference(x)
    nan = np.isnan(x)
    assert np.isnan(got[nan]).all()
    return int(np.abs(_ordered(got[~nan]) - _ordered(want[~nan])).max(initial=0))


def _patterns(start: int, stop: int, step: int) -> np.ndarray:
    return np.arange(start, stop, step, dtype=np.uint64).astype(np.uint32).view(np.float32)


def test_ulp_error_within_the_bound_on_a_strided_sweep_of_all_bit_patterns() -> None:
    step = 97  # odd: every exponent and sign, mantissas spread
    worst = 0
    for start in range(0, 1 << 32, CHUNK * step):
        worst = max(worst, _max_ulp(_patterns(start, min(start + CHUNK * step, 1 << 32), step)))
    assert 1 <= worst <= MAX_ULP  # documented as attained: a bound far above it would hide bugs


@pytest.mark.slow
def test_ulp_error_within_the_bound_on_every_float32() -> None:
    worst = 0
    for start in range(0, 1 << 32, CHUNK):
        worst = max(worst, _max_ulp(_patterns(start, start + CHUNK, 1)))
    assert worst == MAX_ULP


def _steps_back(y: np.ndarray) -> int:
    """The largest drop, in ulps, from one result to the next (0: non-decreasing)."""
    return int(-np.diff(_ordered(y)).min(initial=0))


@pytest.mark.slow
def test_steps_back_on_every_positive_float32_within_the_bound() -> None:
    worst, previous = 0, np.float32(0)
    for start in range(0, 0x7F800001, CHUNK):  # +0 .. +inf in increasing order
        y = numpy_tanh(_patterns(start, min(start + CHUNK, 0x7F800001), 1))
        worst = max(worst, _steps_back(np.concatenate([[previous], y])))
        previous = y[-1]
    assert worst == MAX_STEP_BACK


def test_special_values() -> None:
    tiny = np.float32(np.finfo(np.float32).smallest_subnormal)
    small = np.array(
        [0.0, -0.0, tiny, -tiny, 1e-40, -3e-39, np.finfo(np.float32).tiny, 2.0**-13, -1e-5],
        np.float32,
    )
    y = numpy_tanh(small)
    assert y.tobytes() == small.tobytes()  # tanh(x) is x there, with its sign (-0.0 stays)
    big = np.array([SATURATE, 9.5, 88.0, 3.4e38, np.inf], np.float32)
    assert (numpy_tanh(big) == 1).all() and (numpy_tanh(-big) == -1).all()
    below = np.nextafter(SATURATE, np.float32(0))
    assert _reference(np.array([below]))[0] < 1  # SATURATE is the first float rounding to 1
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FFFFFFF], np.uint32).view(np.float32)
    assert np.isnan(numpy_tanh(nans)).all()


def test_odd_nearly_monotone_and_bounded_on_a_sample() -> None:
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0, 3, 200_000), rng.uniform(-12, 12, 200_000)])
    x = np.sort(x.astype(np.float32))
    y = numpy_tanh(x)
    assert _steps_back(y) <= MAX_STEP_BACK and (np.abs(y) <= 1).all()
    neighbours = _patterns(0x40000000, 0x41100000, 7)  # 2 .. 9 in order, where it steps back
    assert 1 <= _steps_back(numpy_tanh(neighbours)) <= MAX_STEP_BACK
    assert numpy_tanh(-x).tobytes() == (-y).tobytes()  # exactly odd, -0.0 included


def test_sigmoids_expression_stays_in_0_1() -> None:
    x = _patterns(0, 1 << 32, 4099)
    x = np.concatenate([x[~np.isnan(x)], np.float32([np.inf, -np.inf])])
    sigmoid = OPS["sigmoid"].forward(np, x)  # 0.5 * tanh(0.5 * x) + 0.5, through fast_tanh
    assert sigmoid.dtype == np.float32 and ((sigmoid >= 0) & (sigmoid <= 1)).all()
    assert sigmoid[x == np.inf].tolist() == [1.0] and sigmoid[x == -np.inf].tolist() == [0.0]


def test_the_scalar_function_gives_the_vectorized_loops_bits() -> None:
    x = np.random.default_rng(1).normal(0, 4, 300).astype(np.float32)
    x[:4] = [0.0, -0.0, np.inf, np.nan]
    scalar = np.array([tanh_f32(v) for v in x], np.float32)  # numba's scalar code path
    vector = numpy_tanh(x)
    assert np.array_equal(scalar, vector, equal_nan=True)
    assert scalar.tobytes()[:12] == vector.tobytes()[:12]


@pytest.mark.parametrize(
    "dtype", ["float32", "float64", "float16", "int16", "uint16", "int8", "bool", "int32"]
)
def test_numpy_tanh_types_results_as_numpy_does(dtype: str) -> None:
    x = np.arange(-3, 4).astype(dtype)
    with np.errstate(invalid="ignore"):
        want = np.tanh(x)
    got = numpy_tanh(x)
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype == np.float32:  # numpy's float32 loop: ours, within the bound
        assert np.abs(_ordered(got) - _ordered(want)).max() <= MAX_ULP
        assert got.tobytes() == numpy_tanh(x.astype(np.float32)).tobytes()
    else:
        assert got.tobytes() == want.tobytes()  # numpy's own


def test_numpy_tanh_scalars_out_and_layouts() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(64, 48)).astype(np.float32)
    want = numpy_tanh(x)
    scalar = numpy_tanh(np.float32(0.5))
    assert isinstance(scalar, np.float32) and scalar == numpy_tanh(np.array([0.5], np.float32))[0]
    assert isinstance(numpy_tanh(np.array(0.5, np.float32)), np.float32)  # 0-d: as np.tanh
    fortran = numpy_tanh(np.asfortranarray(x))
    assert fortran.flags.f_contiguous and fortran.tobytes("C") == want.tobytes()  # order K
    strided = numpy_tanh(x[:, ::3])
    assert strided.tobytes() == want[:, ::3].tobytes()
    out = np.empty_like(x)
    assert numpy_tanh(x, out=out) is out and out.tobytes() == want.tobytes()
    wide = np.empty((3, 64, 48), np.float64)  # broadcast and cast into out, as numpy's out=
    assert numpy_tanh(x, out=wide) is wide and (wide == want.astype(np.float64)).all()
    same = x.copy()
    assert numpy_tanh(same, out=same) is same and same.tobytes() == want.tobytes()  # in place
    shifted = x.reshape(-1).copy()
    numpy_tanh(shifted[1:], out=shifted[:-1])  # overlapping, not aliased: reads the inputs
    assert shifted[:-1].tobytes() == want.reshape(-1)[1:].tobytes()
    transposed = np.empty((48, 64), np.float32).T  # a non-contiguous-in-C out
    assert numpy_tanh(x, out=transposed) is transposed and (transposed == want).all()


def test_big_arrays_split_over_threads_give_the_same_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.random.default_rng(3).normal(0, 3, (1 << 21) + 7).astype(np.float32)
    monkeypatch.setattr(float32_loops, "MIN_PART", 1 << 18)  # split over the threads
    threaded = numpy_tanh(x)
    monkeypatch.setattr(float32_loops, "MIN_PART", 1 << 40)  # one part
    assert threaded.tobytes() == numpy_tanh(x).tobytes()
    y = x.copy()
    monkeypatch.setattr(float32_loops, "MIN_PART", 1 << 18)
    assert numpy_tanh(y, out=y).tobytes() == threaded.tobytes()  # the in-place loop, threaded


def test_out_as_another_view_of_x_or_overlapping_it_gives_the_plain_result() -> None:
    # a plan's in-place step passes two views of one buffer; a shifted one must not be read
    # after it was written
    raw = np.random.default_rng(4).normal(0, 2, 300).astype(np.float32)
    want = numpy_tanh(raw[:256].copy())
    for shift in (0, 1, -1):
        buffer = np.zeros(300, np.float32)
        buffer[8:264] = raw[:256]
        x = buffer[8:264].reshape(16, 16)
        out = buffer[8 + shift : 264 + shift].reshape(16, 16)
        assert x is not out
        assert numpy_tanh(x, out=out) is out
        assert out.tobytes() == want.tobytes(), shift
