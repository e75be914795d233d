"""float32 ``tanh`` as one branch-free rational function that LLVM vectorizes, for every CPU path.

numba's libm ``tanhf`` is ~10x slower than numpy's SIMD loop; ``tanh_f32`` (selects, no branches,
exactly rounded float32 operations and ``fma``) vectorizes with AVX-512. Eager numpy ops, the
blocked evaluator (``numpy_tanh``) and fused numba kernels (inlining ``tanh_f32``) all run it, so
compiled results stay bit-identical to eager. Error: at most ``MAX_ULP`` ulp from the correctly
rounded tanh, measured over all 2^32 float32 inputs (tests/kernels/test_fast_tanh.py); unlike
numpy's it is not exactly monotone (a larger input may give up to ``MAX_STEP_BACK`` ulp less).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.kernels.fast_math import float32_loops
from dualflow.kernels.fast_math.scalars import SATURATE, tanh_f32
from dualflow.kernels.fast_math.scalars import TANH_FINGERPRINT as FINGERPRINT
from dualflow.kernels.fast_math.scalars import TANH_IMPORT as IMPORT

# tanh_f32 and its names live in ``scalars`` (below the probe weighing it); kernels import here
__all__ = ["FINGERPRINT", "IMPORT", "SATURATE", "fresh_tanh", "numpy_tanh", "tanh_f32"]

MAX_ULP = 5
"""The largest distance, in float32 ulps, from float64 ``np.tanh`` rounded to float32."""
MAX_STEP_BACK = 7
"""The most ulps by which tanh of a float32 may fall below tanh of the float32 before it."""

_kernels = float32_loops.lazy_loops(tanh_f32, f"k_tanh32_{FINGERPRINT}", ("tanh",))


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
