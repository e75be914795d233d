"""float32 ``sigmoid`` as one loop: the op's expression ``0.5 * tanh(0.5 * x) + 0.5``, inlined.

The expression in numpy is four calls over the array (~3.7 us on 16x16 float32, most of it the
calls); the same float32 operations in one numba loop give the same bits (each step is a float32
multiply, ``tanh_f32`` or add, rounded alike; numba fuses no multiply-add without fastmath) in
~1.1 us. Eager ``sigmoid`` runs it on C-ordered float32 numpy arrays (``ops.activation``); fused
kernels already inline the same operations. The expression cannot raise a floating-point warning
(``0.5 * x`` never overflows; NaN is quiet), so numpy warns about nothing the loop keeps silent.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from dualflow.kernels.fast_math import fast_tanh, float32_loops
from dualflow.kernels.fast_math.fast_tanh import tanh_f32
from dualflow.kernels.fast_math.scalars import fingerprint

_HALF = np.float32(0.5)


@numba.njit(inline="always", error_model="numpy")
def sigmoid_f32(x: Any) -> Any:
    """``0.5 * tanh_f32(0.5 * x) + 0.5`` in float32, each operation rounded as numpy's.

    Example:
        >>> [float(sigmoid_f32(np.float32(v))) for v in (0.0, 40.0, -np.inf)]
        [0.5, 1.0, 0.0]
    """
    return _HALF * tanh_f32(_HALF * x) + _HALF


# the loops' cache name changes with tanh_f32's code: never stale machine code
FINGERPRINT = fingerprint(sigmoid_f32, fast_tanh.FINGERPRINT, _HALF)
# its weight: the steps of its expression (``work_weights``)
_kernels = float32_loops.lazy_loops(
    sigmoid_f32, f"k_sigmoid32_{FINGERPRINT}", ("multiply", "tanh", "multiply", "add")
)


def numpy_sigmoid(x: np.ndarray) -> Any:
    """The sigmoid expression over a C-ordered float32 numpy array, as a new array (a scalar
    for a 0-d ``x``, as the expression's ufuncs return).

    Example:
        >>> numpy_sigmoid(np.array([0.0, -40.0, 2.0], np.float32)).tolist()
        [0.5, 0.0, 0.8807970881462097]
    """
    return float32_loops.fresh(_kernels, x)


def sigmoid_out(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """The sigmoid expression of a float32 numpy array written into ``out`` (float32, ``x``'s
    shape; ``x`` itself allowed): a plan's ``out=`` step, as one loop (on both cores for big
    arrays) instead of the expression's four passes.

    Example:
        >>> x = np.array([0.0, 2.0], np.float32)
        >>> sigmoid_out(x, x).tolist()
        [0.5, 0.8807970881462097]
    """
    return float32_loops.apply(_float32_only, _kernels, x, out)


def _float32_only(x: Any, out: Any = None) -> Any:
    raise TypeError(f"sigmoid_out: float32 arrays only, got {np.asarray(x).dtype}")
