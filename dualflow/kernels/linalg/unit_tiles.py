"""A recurrence part's per-step product by register tiles (``tile_ir``): ``c (rows, N) = a
(rows, K) @ v (K, N)``, with ``a`` the part's weight rows (spread: ``SPREAD``) and ``v`` the step's
state feature-major, its N batch columns whole vectors.

OpenBLAS packs a part's weight rows again at every step: at H = 256, N = 16 a part's 512 x 256
x 16 product took ~50 us on one core of a 2-core Zen 4 with its Haswell or SkylakeX table,
against 36 us for the tiles reading the rows where they lie (the LSTM forward of 64 steps,
split in two parts on two threads: 4.5-4.8 -> 3.7-3.9 ms). Each output element is one chain of
fused multiply-adds over K in order from +0.0, whatever the part, the tile or the thread, so
the bits depend on the shapes only. Batches of 1 to ``MAX_VECTORS`` whole vectors take them (16,
32, 48 or 64 rows with AVX-512; 8 to 32 with AVX2); others keep OpenBLAS
(``unit_parts.gemm_rows``).

The same tiles run the rows form (``rows_product``): the operands' roles swapped, ``s`` the
state as the op's arrays hold it (N, K) and ``v`` a contiguous block of weight columns, each
tile writing a block of columns of all N rows where they belong (an output row stride), with
the packs it reads made once a call (``column_blocks``, ``column_slices``; ``transposed_rows``
for the feature-major carries). Where a part's units are whole vectors the recurrences take it
(``rows_fit``): no step transposes its state (``lstm_lockstep``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numba
import numpy as np

from dualflow.kernels.linalg import tile_ir, tiles
from dualflow.kernels.linalg.tile_ir import LANES, rows_for
from dualflow.kernels.linalg.tiles import to_fm

MAX_VECTORS = 4
"""The widest batch the tiles take, in vectors: a tile of 4 vectors keeps 4 rows at most."""


def _tile_rows(vectors: int) -> int:
    # a power of two, so the parts' 16-unit tiles of rows are whole tiles of it
    rows = rows_for(vectors)
    return 1 << (rows.bit_length() - 1)


ROWS = tuple(_tile_rows(v) for v in range(1, MAX_VECTORS + 1))
"""Rows of a full tile, by its vectors (from 1): the most the accumulators hold, a power of 2."""
_full = tile_ir.by_vectors(ROWS)  # a full tile of ROWS[vectors - 1] rows
_one = tile_ir.by_vectors((1, 1, 1, 1))  # a tile of one row
SPREAD = LANES
"""The zero columns after each row of a part's weights (the spread layout, read ``a[:, :K]``
with row stride ``K + SPREAD``): a tile reads ``ROWS`` rows at once, and rows a multiple of 4
KiB apart (an LSTM's ``W^T`` at H = 256: 1024 floats) fall in one set of the L1 cache and evict
each other (the carry's product ran slower than OpenBLAS's). One vector."""
MIN_ROWS = 4
"""The fewest rows a full tile may have for the tiles to take a batch: a tile step loads its
``vectors`` vectors of the state for ``rows x vectors`` multiply-adds, so under 4 rows (a
4-vector batch with AVX2's 16 registers: 2 rows) it loads a vector for every 2 of them. Not
tried on an AVX2 machine (none this session), so such batches stay with OpenBLAS. A property of
the register file; with AVX-512 every width up to 4 vectors has 4 rows or more."""
FINGERPRINT = hashlib.sha256(
    Path(__file__).read_bytes() + Path(tile_ir.__file__).read_bytes() + repr(ROWS).encode()
).hexdigest()[:16]
"""A digest of the tiles (their IR is no Python bytecode), for the stems of kernels inlining
``tile_product``."""


def width(n: int) -> int:
    """``n`` where the tiles take a batch of ``n`` columns (whole vectors, at most
    ``MAX_VECTORS``, in a tile of ``MIN_ROWS`` rows or more), else 0. A batch of part of a
    vector is left to OpenBLAS: padded to a whole one, the tiles did its zeros' work too (N = 8
    with AVX-512: 3.3 against 2.8 ms a forward), and the views of the padded arrays cost the
    cells more than that (N = 12: 5.8 against 4.3).

    Example:
        >>> width(LANES) == LANES, width(2 * LANES) == 2 * LANES, width(LANES - 1), width(0)
        (True, True, 0, 0)
    """
    whole = n > 0 and n % LANES == 0
    return n if whole and n // LANES <= MAX_VECTORS and ROWS[n // LANES - 1] >= MIN_ROWS else 0


def _transpose_into(w, out):
    to_fm(w, out)


def transposed_rows(w: np.ndarray, wide: int) -> np.ndarray:
    """``w.T`` as a float32 copy for a recurrence's backward carry (``W^T[units] @ dg^T``), its
    rows spread (``SPREAD``) where the tiles take the batch (``wide``), else C-ordered.
    One transposing copy in tiles of 16 (``tiles.to_fm``): numpy's ``ascontiguousarray(w.T)``
    and then the spread took ~330 us for an LSTM's 1024 x 256 ``weight_hh`` on a Zen 4, this
    ~90. A copy, so the bits are the transposed array's.

    Example:
        >>> w = np.arange(6, dtype=np.float32).reshape(3, 2)
        >>> transposed_rows(w, 0).tolist(), transposed_rows(w, LANES).shape == (2, 3 + LANES)
        ([[0.0, 2.0, 4.0], [1.0, 3.0, 5.0]], True)
    """
    w = np.ascontiguousarray(w, dtype=np.float32)
    rows, k = w.shape[1], w.shape[0]
    out = np.empty((rows, k + (SPREAD if wide else 0)), np.float32)
    out[:, k:] = 0.0  # the spread's columns, never read by the tiles: zeros, not leftovers
    if w.size:
        _built("transpose_rows", _transpose_into)(w, out[:, :k])
    return out


@numba.njit(inline="always")
def tile_product(rows, k, a, lda, v, wide, c):
    """``c[:rows] = a[:rows] @ v`` given by addresses (int64) of C-ordered float32 data: ``a``
    (rows, k) with row stride ``lda`` elements, ``v`` (k, wide) and ``c`` (rows, wide), ``wide``
    a ``width``. Full tiles of ``ROWS`` rows, then a tile of one row for each left over.

    Example:
        >>> a, v = np.ones((5, 3), np.float32), np.ones((3, LANES), np.float32)
        >>> c = np.zeros((5, LANES), np.float32)
        >>> @numba.njit
        ... def run(a, v, c):
        ...     tile_product(5, 3, a.ctypes.data, 3, v.ctypes.data, c.shape[1], c.ctypes.data)
        >>> run(a, v, c); c[:, 0].tolist()
        [3.0, 3.0, 3.0, 3.0, 3.0]
    """
    # the rows form's loop with a contiguous c (row stride wide): one tile loop for both
    rows_product(wide // LANES, rows, k, a, lda, v, c, wide)


def rows_fit(n: int, bounds: np.ndarray, vectors: int = 1) -> bool:
    """Whether a layer's recurrence takes the rows form (``rows_product`` with ``vectors``
    vectors of columns a tile): the batch ``n`` is a ``width`` and every part's units are
    whole multiples of ``vectors`` vectors (a block of columns then never reaches into another
    gate's or part's columns).

    Example:
        >>> rows_fit(LANES, np.array([0, 128, 256])), rows_fit(LANES, np.array([0, 64, 100]))
        (True, False)
        >>> rows_fit(LANES, np.array([0, 3 * LANES, 6 * LANES]), vectors=2)
        False
    """
    step = vectors * LANES
    return bool(width(n)) and all(int(u) % step == 0 for u in np.diff(bounds))


def _blocks_into(w, out):
    for b in range(out.shape[0]):
        to_fm(w[b * LANES : (b + 1) * LANES], out[b])


def column_blocks(w: np.ndarray) -> np.ndarray:
    """A weight's rows ``w`` (G, K) as ``rows_product``'s operand for ``s @ w.T``: (G / LANES,
    K, LANES), block ``b`` holding rows ``[b * LANES, (b + 1) * LANES)`` transposed, so a tile
    reads one contiguous block (a recurrence's part takes the blocks of its units' gate rows,
    whole vectors each). One transposing copy (``tiles.to_fm``), so the bits are the rows'.

    Example:
        >>> w = np.arange(2 * LANES * 3, dtype=np.float32).reshape(2 * LANES, 3)
        >>> blocks = column_blocks(w)
        >>> blocks.shape == (2, 3, LANES), blocks[1, 2, 0] == w[LANES, 2]
        (True, np.True_)
    """
    w = np.ascontiguousarray(w, dtype=np.float32)
    out = np.empty((w.shape[0] // LANES, w.shape[1], LANES), np.float32)
    if out.size:
        _built("blocks", _blocks_into)(w, out)
    return out


def _slices_into(w, out):
    wide = out.shape[2]
    for b in range(out.shape[0]):
        for k in range(w.shape[0]):
            out[b, k] = w[k, b * wide : (b + 1) * wide]


def column_slices(w: np.ndarray, vectors: int = 1) -> np.ndarray:
    """``w`` (K, G) as ``rows_product``'s operand for ``s @ w`` with ``vectors`` vectors a
    tile: (G / width, K, width) for ``width = vectors * LANES``, block ``b`` holding columns
    ``[b * width, (b + 1) * width)`` (a backward carry's ``dg @ W_hh`` reads W's unit columns
    so). A copy.

    Example:
        >>> w = np.arange(3 * 2 * LANES, dtype=np.float32).reshape(3, 2 * LANES)
        >>> blocks = column_slices(w)
        >>> blocks.shape == (2, 3, LANES), blocks[1, 2, 0] == w[2, LANES]
        (True, np.True_)
        >>> column_slices(w, vectors=2).shape == (1, 3, 2 * LANES)
        True
    """
    w = np.ascontiguousarray(w, dtype=np.float32)
    wide = vectors * LANES
    out = np.empty((w.shape[1] // wide, w.shape[0], wide), np.float32)
    if out.size:
        _built("slices", _slices_into)(w, out)
    return out


def _built(key: str, py_func: Any) -> Any:
    # the packing kernels, compiled at their first need (once: ``built_once``), machine code in
    # the signed kernels store; the stem digests this module and the tiles they inline
    from dualflow.kernels.base import numba_cache  # noqa: PLC0415 - numba, when first used

    def build() -> tuple[Any, str]:
        kernel = numba.njit(nogil=True, cache=False, error_model="numpy")(py_func)
        return kernel, f"k_unit_{key}_{FINGERPRINT}_{tiles.FINGERPRINT}"

    return numba_cache.built_once(_KERNELS, key, build)


_KERNELS: dict[str, Any] = {}


@numba.njit(inline="always")
def rows_product(vectors, n, k, s, s_rows, v, c, c_rows):
    """``c[:n, :width] = s[:n] @ v`` given by addresses (int64) of float32 data, ``width =
    vectors * LANES``: ``s`` (n, k) and ``c`` with row strides ``s_rows`` and ``c_rows``
    elements, ``v`` a contiguous (k, width) block (``column_blocks``, ``column_slices``). Tiles
    of ``ROWS[vectors - 1]`` rows, then one row at a time; each element the chain of FMAs
    ``tile_product`` computes for it with the operands' roles swapped (the same products, in
    the same order: the same bits). Two vectors a tile keep 8 rows with AVX-512: ``s`` rows 4
    KiB apart (an LSTM's dg at H = 256) then stay in one set of the L1 cache, where 16 rows
    evicted each other (a carry's product: 77 against 36 us).

    Example:
        >>> s, v = np.ones((3, 2), np.float32), np.ones((2, LANES), np.float32)
        >>> c = np.zeros((3, 2 * LANES), np.float32)
        >>> @numba.njit
        ... def run(s, v, c):
        ...     rows_product(1, 3, 2, s.ctypes.data, 2, v.ctypes.data, c.ctypes.data, c.shape[1])
        >>> run(s, v, c); c[:, 0].tolist(), float(c[:, LANES:].sum())
        ([2.0, 2.0, 2.0], 0.0)
    """
    full = ROWS[vectors - 1]
    s, v, c = np.int64(s), np.int64(v), np.int64(c)  # numba's addresses are unsigned
    wide = vectors * LANES
    r = 0
    while r + full <= n:
        _full(vectors, k, s + 4 * r * s_rows, s_rows, v, wide, c + 4 * r * c_rows, c_rows)
        r += full
    while r < n:
        _one(vectors, k, s + 4 * r * s_rows, s_rows, v, wide, c + 4 * r * c_rows, c_rows)
        r += 1


@numba.njit(inline="always")
def gates_to_fm(rows, fm, gates, a, b):
    """A part's gate columns of one step's (N, gates x H) gate gradients ``rows``, feature-major
    into ``fm`` (gates x H, N): for each gate, the columns of units ``[a, b)``; the next step's
    carry reads them as its tiles' ``v``.

    Example:
        >>> rows, fm = np.arange(8.0).reshape(2, 4), np.zeros((4, 2))
        >>> @numba.njit
        ... def run(rows, fm):
        ...     gates_to_fm(rows, fm, 2, 1, 2)
        >>> run(rows, fm); fm[:, 0].tolist()
        [0.0, 1.0, 0.0, 3.0]
    """
    hidden = rows.shape[1] // gates
    for g in range(gates):
        lo = g * hidden + a
        to_fm(rows[:, lo : lo + b - a], fm[lo : lo + b - a])
