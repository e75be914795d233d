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

import numpy as np

from dualflow.kernels.fast_math import float32_loops
from dualflow.kernels.fast_math.scalars import EXP_FINGERPRINT as FINGERPRINT
from dualflow.kernels.fast_math.scalars import EXP_IMPORT as IMPORT
from dualflow.kernels.fast_math.scalars import exp_f32

# exp_f32 and its names live in ``scalars`` (below the probe weighing it); kernels import here
__all__ = ["FINGERPRINT", "IMPORT", "exp_f32", "numpy_exp"]

MAX_ULP = 1
"""The largest distance, in float32 ulps, from float64 ``np.exp`` rounded to float32."""
MAX_STEP_BACK = 1
"""The most ulps by which exp of a float32 may fall below exp of the float32 before it (about 2900
such steps among all 2^32 inputs; numpy's is monotone)."""

_kernels = float32_loops.lazy_loops(exp_f32, f"k_exp32_{FINGERPRINT}", ("exp",))


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
