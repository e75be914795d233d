"""``matmul(xp, a, b, out=None)``: numpy's matrix product, routed so BLAS sees large GEMMs.

``(..., M, K) @ (K, N)`` (a linear layer on a batch of sequences) is one ``(rows, K) @ (K, N)``
GEMM: numpy's batched matmul calls BLAS once per leading index, each call too small to keep the
machine's cores busy (46-105 GFLOP/s against 140-190 for the one GEMM, 16 x 64 x 1024 x 256
float32 on 2 cores). A few rows times a transposed matrix (``x @ W.T`` of a linear layer on a
small batch, an LSTM step) is computed as ``(W @ x.T).T`` up to the row count this machine's BLAS
runs faster so (``thin_rows``, measured: OpenBLAS on one Zen 4 ran the first form at half the
rate, 16 x 256 x 1024 float32: 205 against 116 us on one thread, 133 against 64 on two).
Every other case is ``xp.matmul`` itself. The result is C-ordered either way.
"""

from __future__ import annotations

import math
from typing import Any

from dualflow.kernels.linalg.thin_rows import thin_rows


def stacked_rows(a: Any, b: Any) -> bool:
    """Whether ``a @ b`` is a stack of matrices times one matrix (run as one 2-D GEMM).

    Example:
        >>> import numpy as np
        >>> stacked_rows(np.zeros((2, 3, 4)), np.zeros((4, 5))), stacked_rows(np.zeros((3, 4)),
        ...     np.zeros((4, 5)))
        (True, False)
    """
    return a.ndim > 2 and b.ndim == 2


def thin_times_transposed(a: Any, b: Any) -> bool:
    """Whether ``a @ b`` is a few rows (at most ``thin_rows()``) times a transposed
    (column-major) matrix.

    Example:
        >>> import numpy as np
        >>> w = np.zeros((8, 4))
        >>> thin_times_transposed(np.zeros((1, 4)), w.T) == (thin_rows() >= 1)
        True
        >>> thin_times_transposed(np.zeros((2, 8)), w)
        False
    """
    return (
        a.ndim == 2
        and b.ndim == 2
        and b.flags.f_contiguous
        and not b.flags.c_contiguous
        and a.shape[0] <= thin_rows()  # last: measured at the first product that may take it
    )


def matmul(xp: Any, a: Any, b: Any, out: Any = None) -> Any:
    """``a @ b`` with numpy's rules (into ``out`` when given, which is returned).

    Example:
        >>> import numpy as np
        >>> a, b = np.arange(12.0).reshape(2, 3, 2), np.ones((2, 2))
        >>> bool(np.array_equal(matmul(np, a, b), np.matmul(a, b)))
        True
    """
    if thin_times_transposed(a, b):
        product = xp.matmul(b.T, a.T).T  # (W @ x^T)^T, copied C-ordered below
        if out is None:
            return xp.ascontiguousarray(product)
        out[...] = product
        return out
    if not stacked_rows(a, b):
        return xp.matmul(a, b) if out is None else xp.matmul(a, b, out=out)
    rows = a.reshape(math.prod(a.shape[:-1]), a.shape[-1])  # a copy when the axes do not merge
    shape = (*a.shape[:-1], b.shape[-1])
    if out is None:
        return xp.matmul(rows, b).reshape(shape)
    if out.flags.c_contiguous:  # a view of out: BLAS writes the result in place
        xp.matmul(rows, b, out=out.reshape(rows.shape[0], b.shape[-1]))
    else:
        out[...] = xp.matmul(rows, b).reshape(shape)
    return out
