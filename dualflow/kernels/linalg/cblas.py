"""numpy's OpenBLAS ``cblas_sgemm`` as a function numba kernels call, so a kernel looping over
a recurrence's steps runs each step's GEMM without returning to Python.

numpy 2's wheels ship OpenBLAS with 64-bit integers and prefixed, suffixed names
(``scipy_cblas_sgemm64_``); a build with 64-bit integers under the plain names serves too.
Another BLAS, or one with 32-bit integers, offers none: callers then keep numpy's ``matmul``.
The function is passed to kernels as an argument (its address is read at each call), so their
machine code, which the kernels store keeps across processes, never holds an address.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

from dualflow.background.blas import library

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112
"""CBLAS's enum values for row-major operands, and for an operand read as it is or transposed."""
_NAMES = ("scipy_cblas_sgemm64_", "cblas_sgemm64_")
_INT, _ENUM, _FLOAT = ctypes.c_int64, ctypes.c_int, ctypes.c_float
# order, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc: pointers are passed as
# 64-bit integers (``array.ctypes.data`` in numba), which the x86-64 and AArch64 ABIs pass in
# the same registers as pointers
_ARGS = [_ENUM, _ENUM, _ENUM, _INT, _INT, _INT, _FLOAT, _INT, _INT, _INT, _INT, _FLOAT, _INT, _INT]


@functools.cache
def sgemm() -> Any:
    """OpenBLAS's ``cblas_sgemm`` with 64-bit integers (a ctypes function numba calls), or None.

    Example:
        >>> import numpy as np
        >>> f = sgemm()
        >>> a, out = np.ones((2, 3), np.float32), np.zeros((2, 2), np.float32)
        >>> _ = f is None or f(ROW_MAJOR, NO_TRANS, TRANS, 2, 2, 3, 1.0, a.ctypes.data, 3,
        ...                    a.ctypes.data, 3, 0.0, out.ctypes.data, 2)
        >>> f is None or out.tolist() == [[3.0, 3.0], [3.0, 3.0]]
        True
    """
    lib = library()
    function = next((getattr(lib, n) for n in _NAMES if hasattr(lib, n)), None)
    if function is None:
        return None
    function.argtypes, function.restype = _ARGS, None
    return function
