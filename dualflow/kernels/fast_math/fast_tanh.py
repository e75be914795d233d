"""float32 ``tanh`` as one branch-free rational function that LLVM vectorizes, for every CPU path.

numba's libm ``tanhf`` is ~10x slower than numpy's SIMD loop; ``tanh_f32`` (selects, no branches,
exactly rounded float32 operations and ``fma``) vectorizes with AVX-512. Eager numpy ops, the
blocked evaluator (``numpy_tanh``) and fused numba kernels (inlining ``tanh_f32``) all run it, so
compiled results stay bit-identical to eager. Error: at most ``MAX_ULP`` ulp from the correctly
rounded tanh, measured over all 2^32 float32 inputs (tests/kernels/test_fast_tanh.py); unlike
numpy's it is not exactly monotone (a larger input may give up to ``MAX_STEP_BACK`` ulp less).
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np

from dualflow.kernels.fast_math import float32_loops
from dualflow.kernels.fast_math.float32_loops import fingerprint, fma32

MAX_ULP = 5
"""The largest distance, in float32 ulps, from float64 ``np.tanh`` rounded to float32."""
MAX_STEP_BACK = 7
"""The most ulps by which tanh of a float32 may fall below tanh of the float32 before it."""

# tanh(x) = x * P(x^2) / Q(x^2) on |x| < SATURATE: a minimax fit of tanh(x)/x (relative error
# 0.36 ulp, 0.49 with float32 coefficients) whose coefficients are all positive, so Horner's
# rule has no cancellation; P(0) = Q(0) = 1 makes it exactly x where x^2 is below 2^-24.
_P = tuple(np.float32(v) for v in ("0.13383268", "0.003498148", "2.0647229e-05", "1.3400205e-08"))
_Q = tuple(np.float32(v) for v in ("0.4671659", "0.025886985", "0.00032896482", "7.796738e-07"))
_P1, _P2, _P3, _P4 = _P
_Q1, _Q2, _Q3, _Q4 = _Q
SATURATE = np.float32(9.010913848876953)  # the least x whose rounded tanh is 1.0
_ONE = np.float32(1.0)


@numba.njit(inline="always", error_model="numpy")
def tanh_f32(x: Any) -> Any:
    """tanh of one float32 in float32, within ``MAX_ULP`` ulp; -0.0, ±inf and NaN as numpy's.

    Only selects (NaN fails every comparison, so it flows through), so loops calling it
    vectorize; numba inlines it into them.

    Example:
        >>> [float(tanh_f32(np.float32(v))) for v in (0.0, 20.0, -np.inf)]
        [0.0, 1.0, -1.0]
    """
    a = abs(x)
    c = SATURATE if a > SATURATE else a  # NaN fails the test: it flows through
    s = c * c
    p = fma32(fma32(fma32(fma32(_P4, s, _P3), s, _P2), s, _P1), s, _ONE)
    q = fma32(fma32(fma32(fma32(_Q4, s, _Q3), s, _Q2), s, _Q1), s, _ONE)
    r = c * p / q
    r = _ONE if r > _ONE or c == SATURATE else r
    return math.copysign(r, x)  # -0.0 stays -0.0; an odd function, exactly


FINGERPRINT = fingerprint(tanh_f32, _P, _Q, SATURATE)
IMPORT = f"from dualflow.kernels.fast_math.fast_tanh import tanh_f32  # {FINGERPRINT}"
"""The line a generated numba kernel imports ``tanh_f32`` with (``numba_elementwise.header``)."""


_kernels = float32_loops.lazy_loops(tanh_f32, f"k_tanh32_{FINGERPRINT}")


def numpy_tanh(x: Any, out: Any = None) -> Any:
    """``np.tanh(x, out=out)``, whose float32 loop is ``tanh_f32`` (on both cores for big
    arrays); other dtypes are numpy's own.

    Example:
        >>> numpy_tanh(np.array([0.0, -0.5, 30.0], np.float32)).tolist()
        [0.0, -0.46211716532707214, 1.0]
        >>> numpy_tanh(np.array([0.5])).tolist() == np.tanh(np.array([0.5])).tolist()
        True
    """
    return float32_loops.apply(np.tanh, _kernels, x, out)


def fresh_tanh(x: np.ndarray) -> Any:
    """``numpy_tanh`` of a C-ordered float32 numpy array without its checks (eager ``tanh``'s
    common call): a new array, or a scalar for a 0-d ``x``.

    Example:
        >>> fresh_tanh(np.array([0.0, 30.0], np.float32)).tolist()
        [0.0, 1.0]
    """
    return float32_loops.fresh(_kernels, x)
