"""float32 ``exp`` as branch-free float32 arithmetic that LLVM vectorizes, for every CPU path.

``exp_f32`` reduces ``x = k ln2 + r`` (|r| <= ln2/2, Cody-Waite with ``fma``), takes a degree-6
minimax polynomial of ``exp(r)`` and multiplies by ``2**k`` in two exact halves, so overflow gives
inf and underflow gives the rounded subnormal or 0, as IEEE multiplication rounds them. Eager
numpy ops, the blocked evaluator (``numpy_exp``) and fused numba kernels (inlining ``exp_f32``) all
run it, so compiled stays bit-identical to eager; at most ``MAX_ULP`` ulp from the correctly
rounded exp over all 2^32 float32 inputs (tests/kernels/test_fast_exp.py).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from dualflow.kernels.fast_math import float32_loops
from dualflow.kernels.fast_math.float32_loops import fingerprint, fma32, pow2_between

MAX_ULP = 1
"""The largest distance, in float32 ulps, from float64 ``np.exp`` rounded to float32."""
MAX_STEP_BACK = 1
"""The most ulps by which exp of a float32 may fall below exp of the float32 before it (about 2900
such steps among all 2^32 inputs; numpy's is monotone)."""

_HIGH = np.float32(89.0)  # exp(89) overflows: larger inputs (and +inf) give inf
_LOW = np.float32(-104.0)  # exp(-104) rounds to 0: smaller inputs (and -inf) give 0
_LOG2E = np.float32(1.4426950408889634)
# t = x * log2(e) + 1.5 * 2**23 rounds to an integer k + 1.5 * 2**23, whose bits are k + bits(1.5
# * 2**23): so k is both a float (t - MAGIC) and, as a bit difference, the exponent of 2**k
_MAGIC = np.float32(12582912.0)
_NEG_LN2_HIGH = np.float32(-0.693359375)  # 9 bits: k * this is exact for |k| <= 150
_NEG_LN2_LOW = np.float32(2.12194440e-4)
# exp(r) = 1 + r + r^2 (C2 + C3 r + ... + C6 r^4), a minimax fit on |r| <= 0.3476 (relative error
# 0.05 ulp, 0.07 with float32 coefficients)
_C = tuple(
    np.float32(v) for v in ("0.49999994", "0.1666652", "0.041668408", "0.008368919", "0.0013814179")
)
_C2, _C3, _C4, _C5, _C6 = _C
_ONE, _HALF = np.float32(1.0), np.float32(0.5)


@numba.njit(inline="always", error_model="numpy")
def exp_f32(x: Any) -> Any:
    """exp of one float32 in float32, within ``MAX_ULP`` ulp; inf, 0, subnormals and NaN as
    numpy's. Only selects (NaN fails both clamps and flows through), so loops vectorize.

    Example:
        >>> [float(exp_f32(np.float32(v))) for v in (0.0, 100.0, -np.inf, -103.0)]
        [1.0, inf, 0.0, 1.401298464324817e-45]
    """
    c = _HIGH if x > _HIGH else x
    c = _LOW if c < _LOW else c
    t = fma32(c, _LOG2E, _MAGIC)
    k = t - _MAGIC
    r = fma32(k, _NEG_LN2_LOW, fma32(k, _NEG_LN2_HIGH, c))
    p = fma32(fma32(fma32(fma32(_C6, r, _C5), r, _C4), r, _C3), r, _C2)
    p = fma32(fma32(p, r, _ONE), r, _ONE)
    half = fma32(k, _HALF, _MAGIC)  # k1 = round(k / 2): 2**k = 2**k1 * 2**(k - k1), both normal
    return p * pow2_between(half, _MAGIC) * pow2_between(t, half)  # one rounding: the last


FINGERPRINT = fingerprint(exp_f32, _HIGH, _LOW, _LOG2E, _MAGIC, _NEG_LN2_HIGH, _NEG_LN2_LOW, _C)
IMPORT = f"from dualflow.kernels.fast_math.fast_exp import exp_f32  # {FINGERPRINT}"
"""The line a generated numba kernel imports ``exp_f32`` with (``numba_elementwise.header``)."""


_kernels = float32_loops.lazy_loops(exp_f32, f"k_exp32_{FINGERPRINT}")


def numpy_exp(x: Any, out: Any = None) -> Any:
    """``np.exp(x, out=out)``, whose float32 loop is ``exp_f32`` (on both cores for big arrays);
    other dtypes are numpy's own.

    Example:
        >>> numpy_exp(np.array([0.0, 1.0, -200.0], np.float32)).tolist()
        [1.0, 2.7182817459106445, 0.0]
        >>> numpy_exp(np.array([0.5])).tolist() == np.exp(np.array([0.5])).tolist()
        True
    """
    return float32_loops.apply(np.exp, _kernels, x, out)
