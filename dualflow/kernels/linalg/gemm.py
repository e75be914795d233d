"""``matmul(xp, a, b, out=None)``: numpy's matrix product, routed so BLAS sees large GEMMs.

``(..., M, K) @ (K, N)`` (a linear layer on a batch of sequences) is one ``(rows, K) @ (K, N)``
GEMM: numpy's batched matmul calls BLAS once per leading index, each call too small to keep the
machine's cores busy (46-105 GFLOP/s against 140-190 for the one GEMM, 16 x 64 x 1024 x 256
float32 on 2 cores). A few rows times a transposed matrix (``x @ W.T`` of a linear layer on a
small batch, an LSTM step) runs on ``thin_gemm``'s register tiles up to the row count they beat
the BLAS on this machine (W read where it lies, never packed), else as ``(W @ x.T).T`` up to the
row count this machine's BLAS runs faster so (``thin_rows``, measured: OpenBLAS on one Zen 4 ran
the first form at half the rate, 16 x 256 x 1024 float32: 205 against 116 us on one thread, 133
against 64 on two).
A batch of small products (attention's (N*heads, L, hd) @ (N*heads, hd, L)) is split over the
native crew's threads where its float32 matrices go to BLAS as they are (``batched_native``),
else over the kernel threads (``batch_parts``): OpenBLAS runs a GEMM of at most 4 * 65536
multiply-adds on the calling thread, so numpy's loop over 64 such matrices used one core of two;
each part runs the same per-matrix calls, so the bits do not depend on the split. Every other
case is ``xp.matmul`` itself. The result is C-ordered either way.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from dualflow.kernels.base import native_crew
from dualflow.kernels.base.cpu_threads import parts_for, run_parts, split
from dualflow.kernels.base.machine_constants import machine_constants
from dualflow.kernels.linalg import batched_native, thin_gemm
from dualflow.kernels.linalg.thin_rows import thin_rows

# OpenBLAS (interface/gemm.c) runs a GEMM of M*N*K <= 65536 * GEMM_MULTITHREAD_THRESHOLD (4) on
# one thread: only such products are split, so two parts never contend for BLAS's own threads
SMALL_MNK = 4 * 65536
# FLOPs a part must have for the split to pay: None takes the machine's (``machine_constants``:
# four hand-offs of one-thread GEMM time; the default 2^23 was one machine's); an int here
# (tests) overrides it
PART_FLOPS: int | None = None


def part_flops() -> int:
    """FLOPs per part from which a batch of small products is split: ``PART_FLOPS``, else the
    machine's (``machine_constants().part_flops``).

    Example:
        >>> part_flops() == (PART_FLOPS or machine_constants().part_flops)
        True
    """
    return PART_FLOPS or machine_constants().part_flops


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


def batch_parts(xp: Any, a: Any, b: Any, out: Any = None) -> int:
    """Parts a batched product of small matrices is split into over the kernel threads (1: one
    ``xp.matmul`` call): numpy float32/float64 operands with the same batch shape, each product
    within ``SMALL_MNK``, a C-ordered ``out`` if any, and ``part_flops()`` per part.

    Example:
        >>> a = np.zeros((64, 64, 64), np.float32)
        >>> batch_parts(np, a, a) == parts_for(2 * 64**4, part_flops()), batch_parts(np, a[0], a[0])
        (True, 1)
    """
    if (
        xp is not np
        or a.ndim < 3
        or a.shape[:-2] != b.shape[:-2]
        or a.dtype != b.dtype
        or a.dtype.char not in "fd"
        or (out is not None and not out.flags.c_contiguous)
    ):
        return 1
    mnk = _mnk(a, b)
    if mnk > SMALL_MNK or a.shape[0] < 2:
        return 1
    return min(a.shape[0], parts_for(2 * mnk * math.prod(a.shape[:-2]), part_flops()))


def _mnk(a: Any, b: Any) -> int:
    # one product's multiply-adds (OpenBLAS runs it on the calling thread up to ``SMALL_MNK``)
    return a.shape[-2] * a.shape[-1] * b.shape[-1]


def _split_batch(xp: Any, a: Any, b: Any, out: Any, parts: int) -> Any:
    """``a @ b`` as ``parts`` products of consecutive matrices, each into its slice of ``out``."""
    if out is None:
        out = xp.empty((*a.shape[:-1], b.shape[-1]), a.dtype)
    jobs = [
        functools.partial(xp.matmul, a[i:j], b[i:j], out=out[i:j])
        for i, j in split(a.shape[0], parts)
    ]
    run_parts(jobs)
    return out


def matmul(xp: Any, a: Any, b: Any, out: Any = None) -> Any:
    """``a @ b`` with numpy's rules (into ``out`` when given, which is returned).

    Example:
        >>> import numpy as np
        >>> a, b = np.arange(12.0).reshape(2, 3, 2), np.ones((2, 2))
        >>> bool(np.array_equal(matmul(np, a, b), np.matmul(a, b)))
        True
    """
    if xp is np and thin_gemm.takes(a, b, out):  # x @ W.T, few rows: W read in place
        return thin_gemm.matmul(a, b, out)
    if thin_times_transposed(a, b):
        product = xp.matmul(b.T, a.T).T  # (W @ x^T)^T, copied C-ordered below
        if out is None:
            return xp.ascontiguousarray(product)
        out[...] = product
        return out
    if not stacked_rows(a, b):
        if xp is np and a.ndim == b.ndim == 3 and _mnk(a, b) <= SMALL_MNK:
            product = batched_native.matmul(a, b, out)  # the crew's threads, where it pays
            if product is not None:
                return product
        parts = batch_parts(xp, a, b, out)
        if parts > 1:
            return _split_batch(xp, a, b, out, parts)
        return _nudged(xp, a, b, xp.matmul(a, b) if out is None else xp.matmul(a, b, out=out))
    rows = a.reshape(math.prod(a.shape[:-1]), a.shape[-1])  # a copy when the axes do not merge
    shape = (*a.shape[:-1], b.shape[-1])
    if out is None:
        return _nudged(xp, rows, b, xp.matmul(rows, b).reshape(shape))
    if out.flags.c_contiguous:  # a view of out: BLAS writes the result in place
        xp.matmul(rows, b, out=out.reshape(rows.shape[0], b.shape[-1]))
    else:
        out[...] = xp.matmul(rows, b).reshape(shape)
    return _nudged(xp, rows, b, out)


def _nudged(xp: Any, a: Any, b: Any, product: Any) -> Any:
    """``product``, the crew's sleeping workers woken after a GEMM large enough for BLAS's
    threads (and long enough for the crew to have slept through it): the kernels after it
    split at once."""
    if xp is np and a.ndim == 2 and a.shape[0] * a.shape[1] * b.shape[-1] > SMALL_MNK:
        native_crew.nudge()
    return product
