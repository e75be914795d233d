"""What the recurrences split by hidden units share (``lstm_lockstep``, ``gru_lockstep``): the
fixed two-part split, which layers take it, the weights' rows packed by part, a part's GEMM in
row blocks, the runner, and the typing-time helper for absent gradients.

The split is fixed (``unit_bounds``: two parts of whole 16-unit tiles where the size allows),
not the thread count's: OpenBLAS's bits depend on how a GEMM's rows are blocked, so a split that
followed the thread count would round differently on different machines. One thread runs both
parts one after another with the same bits.
"""

from __future__ import annotations

import hashlib
import itertools
from typing import Any

import numba
import numpy as np

from dualflow.background import blas_cores
from dualflow.kernels.base import lockstep
from dualflow.kernels.base.lockstep import claim_part, new_sync, part_done, wait_for_step
from dualflow.kernels.base.numba_cache import code_fingerprint
from dualflow.kernels.fast_math.scalars import fingerprint
from dualflow.kernels.linalg import unit_tiles
from dualflow.kernels.linalg.cblas import NO_TRANS, ROW_MAJOR, sgemm
from dualflow.kernels.linalg.unit_tiles import tile_product

PARTS = 2
TILE = 16
"""Units per tile of ``tiles``' transposes: a part's first unit is a multiple of it."""
MIN_HIDDEN = 2 * TILE
"""The least hidden size split in two: each part at least one whole tile."""
MIN_BATCH = 8
"""The least batch (the GEMMs' N) the split takes. A part's GEMM packs its ``gates x units x H``
weights again at every step and does N multiply-adds per packed weight: below a few columns the
packing is the step, and the one-GEMM loop (numpy's matmul: a matrix-vector product at N = 1)
ran faster (N = 1, H = 256: 1.16 against 3.13 ms a forward of 64 steps; N = 4, H = 64: 0.48
against 0.54 ms), while from 8 columns the split won or tied (N = 8, H = 256: forward 3.01
against 3.37, backward 3.02 against 3.66; H = 64: 0.54 against 0.54 and 0.40 against 0.56).
Measured on one machine (2-core Zen 4): a structural threshold, but its value is that machine's."""


SMALL_MNK = 10**6
"""The most multiply-adds of a product OpenBLAS runs by its direct small-matrix kernel, which
reads the operands where they lie instead of packing them (``SMALL_CORES``' tables; OpenBLAS's
``sgemm_small_kernel_permit_skylakex.c``). A step's part GEMM packs its ``gates x units x H``
weights at every step and does only N multiply-adds per packed weight, so cutting it into row
blocks within this size skips the packing: at N = 16, H = 256 a part's forward GEMM took 31
against 44 us and its backward carry 43 against 54 (one core, SkylakeX table)."""
SMALL_TN_MN = 1200
"""OpenBLAS's further limit for a product whose first column-major operand is transposed (the
backward carry's ``W^T @ dg^T``, row-major): at most this many outputs (N x rows)."""
SMALL_CORES = frozenset({"skylakex", "cooperlake", "sapphirerapids"})
"""OpenBLAS's x86-64 tables that have the small-matrix kernels (lower case)."""
MIN_BLOCK = 2 * TILE
"""The fewest rows a block may have: below, the calls and the re-read of the other operand cost
more than the packing saves (N = 32, H = 256: 16-row blocks of the carry took 87 against 80 us
whole; N = 64: 48-row forward blocks 118 against 113, the one measured loss kept)."""


def row_block(n: int, k: int, transposed_b: bool) -> int:
    """Rows per call of a part's ``rows x n x k`` GEMM (``gemm_rows``): the most whole tiles
    within OpenBLAS's small-matrix limits where its running table has that kernel, else 0 (one
    call). Fixed by the shape and the table, never by a timing, so the bits are too.

    Example:
        >>> small = (blas_cores.core_name() or "").lower() in SMALL_CORES
        >>> row_block(16, 256, False) == (240 if small else 0), row_block(256, 256, False)
        (True, 0)
        >>> row_block(16, 1024, True) == (48 if small else 0)
        True
    """
    if n * k == 0 or (blas_cores.core_name() or "").lower() not in SMALL_CORES:
        return 0
    rows = SMALL_MNK // (n * k)
    if transposed_b:
        rows = min(rows, SMALL_TN_MN // n)
    rows -= rows % TILE
    return rows if rows >= MIN_BLOCK else 0


@numba.njit(inline="always")
def gemm_rows(gemm, trans_b, rows, n, k, a, b, ldb, c, block):
    """``c[:rows] = a[:rows] @ op(b)`` for C-ordered float32 ``a`` (rows, k) and ``c`` (rows, n)
    given by address, in calls of ``block`` rows (0: one call; ``row_block``).

    Example:
        >>> x, out = np.ones((3, 2), np.float32), np.zeros((3, 3), np.float32)
        >>> _ = sgemm() is None or gemm_rows(sgemm(), 112, 3, 3, 2, x.ctypes.data, x.ctypes.data,
        ...                                  2, out.ctypes.data, 1)
        >>> sgemm() is None or out.tolist() == [[2.0] * 3] * 3
        True
    """
    step = rows if block <= 0 else block
    for r in range(0, rows, step):
        gemm(ROW_MAJOR, NO_TRANS, trans_b, min(step, rows - r), n, k, np.float32(1.0),
             a + 4 * r * k, k, b, ldb, np.float32(0.0), c + 4 * r * n, n)  # fmt: skip


@numba.njit(inline="always")
def part_product(gemm, block, wide, rows, n, k, a, lda, b, c):
    """``c[:rows] = a[:rows] @ b`` for a part's gate rows given by address: ``a`` (rows, k) with
    row stride ``lda``, ``b`` (k, n), ``c`` (rows, n), C-ordered float32. By the register tiles
    where ``wide`` (``unit_tiles.width(n)``), else by BLAS in calls of ``block`` rows
    (``gemm_rows``; ``lda`` is then k).

    Example:
        >>> x, out = np.ones((3, 2), np.float32), np.zeros((3, 3), np.float32)
        >>> _ = sgemm() is None or part_product(sgemm(), 0, 0, 3, 3, 2, x.ctypes.data, 2,
        ...                                     x.T.copy().ctypes.data, out.ctypes.data)
        >>> sgemm() is None or out.tolist() == [[2.0] * 3] * 3
        True
    """
    if wide:
        tile_product(rows, k, a, lda, b, wide, c)
    else:
        gemm_rows(gemm, NO_TRANS, rows, n, k, a, b, n, c, block)


def fits(xp: Any, dtype: Any, hidden: int, batch: int) -> bool:
    """Whether the lockstep recurrences run these arrays: numpy float32, ``MIN_HIDDEN`` units or
    more, ``MIN_BATCH`` rows or more, and OpenBLAS's ``cblas_sgemm`` reachable.

    Example:
        >>> fits(np, np.float32, 256, 16) == (sgemm() is not None), fits(np, np.float32, 8, 16)
        (True, False)
        >>> fits(np, np.float32, 256, 1)
        False
    """
    return (
        xp is np
        and np.dtype(dtype) == np.float32
        and hidden >= MIN_HIDDEN
        and batch >= MIN_BATCH
        and sgemm() is not None
    )


def unit_bounds(hidden: int) -> np.ndarray:
    """The parts' unit ranges ``[bounds[k], bounds[k + 1])``: the first part's size is half the
    units rounded up to whole tiles.

    Example:
        >>> unit_bounds(256).tolist(), unit_bounds(100).tolist()
        ([0, 128, 256], [0, 64, 100])
    """
    half = -(-hidden // PARTS)
    first = min(hidden, -(-half // TILE) * TILE)
    return np.array([0, first, hidden], np.int64)


def gate_rows_by_part(w: np.ndarray, bounds: np.ndarray, gates: int, pad: int = 0) -> np.ndarray:
    """``w`` (gates * H, ...) with each part's gate rows together, C-ordered float32: part k's
    rows are ``[gates * bounds[k], gates * bounds[k + 1])``, gate by gate (an LSTM's [i, f, g,
    o] or a GRU's [r, z, n] of its units). A 1-D ``w`` (a bias) is reordered the same way. A 2-D
    ``w`` may take ``pad`` zero columns after its own (``unit_tiles.SPREAD``'s layout, in
    the same one copy: a step's weights are packed at every call).

    Example:
        >>> w = np.arange(8.0).reshape(8, 1)
        >>> gate_rows_by_part(w, np.array([0, 1, 2]), 4)[:, 0].tolist()
        [0.0, 2.0, 4.0, 6.0, 1.0, 3.0, 5.0, 7.0]
        >>> gate_rows_by_part(w, np.array([0, 1, 2]), 4, pad=2)[1].tolist()
        [2.0, 0.0, 0.0]
    """
    hidden = w.shape[0] // gates
    blocks = w.reshape(gates, hidden, *w.shape[1:])
    out = np.empty((w.shape[0], w.shape[1] + pad) if pad else w.shape, np.float32)
    rows = out[:, : w.shape[1]] if pad else out
    if pad:
        out[:, w.shape[1] :] = 0.0
    r = 0
    for a, b in itertools.pairwise(bounds):
        for g in range(gates):
            rows[r : r + b - a] = blocks[g, a:b]
            r += b - a
    return out


def run(loop: Any, args: tuple, steps: int) -> None:
    """``loop(*args, sync)`` on up to ``PARTS`` threads in lockstep (``run_lockstep``).

    Example:
        >>> seen = []
        >>> run(lambda tag, first, sync: seen.append(len(sync)), ("x",), 3)
        >>> seen[0]
        7
    """
    sync = new_sync(steps, PARTS)
    lockstep.run_lockstep(PARTS, lambda first: loop(*args, first, sync))


def step_of(a, t):
    """``a[t]``, or None for an absent gradient (``_step_of`` picks the form at typing).

    Example:
        >>> step_of(None, 0), step_of(np.arange(3), 1)
        (None, np.int64(1))
    """
    return None if a is None else a[t]


@numba.extending.overload(step_of, inline="always")
def _step_of(a, t):
    if isinstance(a, numba.types.NoneType):
        return lambda a, t: None
    return lambda a, t: a[t]


FINGERPRINT = hashlib.sha256(
    "".join(
        [fingerprint(f) for f in (wait_for_step, claim_part, part_done, gemm_rows, part_product)]
        + [lockstep.FINGERPRINT, code_fingerprint(_step_of.__code__).hex(), unit_tiles.FINGERPRINT]
    ).encode()
).hexdigest()[:16]
"""A digest of the protocol and ``step_of`` the split recurrences' loops inline, for their
kernels' cache stems."""
