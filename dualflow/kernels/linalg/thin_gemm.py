"""A few rows times a transposed matrix, ``x @ W.T`` with float32 ``x`` (M, K) and ``W`` (N, K)
both C-ordered (a linear layer's forward on a small batch), by ``tile_ir``'s register tiles over
W's rows as they lie: x is packed once as ``x.T`` (K, M rounded up to whole vectors) and each
tile runs a few of W's rows against all of it, so W is read once, never packed.

OpenBLAS packs W at every call for such shapes: on an AVX-512 Xeon, 64 x 1000 x 1000 ran at 103
GFLOP/s on one thread against 154 here, and 704 against 459 us on two (the tiles split over the
native crew, ``crew_ranges``). Each output element is one chain of fused multiply-adds over K
in order (``tile_ir``): its bits depend on neither the split nor the tile. Whether this route
beats the one ``gemm.matmul`` takes otherwise is measured once per machine, at two K
(``row_limit``): the largest row count where it does, 0 where it never does (and under
``DUALFLOW_MACHINE_CONSTANTS=defaults``), so every process on a machine routes alike, eager and
compiled.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import math
from pathlib import Path
from typing import Any

import numba
import numpy as np

from dualflow.kernels.base import cpu_threads, crew_ranges, native_crew, numba_cache
from dualflow.kernels.base.crew_ranges import HI, LO
from dualflow.kernels.base.native_calls import as_voidptr
from dualflow.kernels.base.per_machine import PerMachine, best_of, one_blas_thread
from dualflow.kernels.linalg import batched_native, tile_ir
from dualflow.kernels.linalg.thin_rows import choose, thin_rows
from dualflow.kernels.linalg.tile_ir import ACCUMULATORS, LANES, rows_for

MIN_SIDE = 64
"""Products with a shorter K or N stay with the BLAS: a tile's stores would weigh on its FMAs
(short K), packing x on its tiles (few of W's rows: 64 x 1000 x 10 took 62 against 12 us)."""
CANDIDATES = tuple(r for r in (8, 16, 32, 64) if r <= 4 * LANES)
PROBES = ((256, 1024), (1024, 1024))
"""(K, N) of the probes' W: linear layers' and recurrences' shapes; a product takes the
probe nearest its K. With K = 256 the tiles' packing of x weighs more: 32 x 256 x 512 took 92
us on one thread against 78 for the transposed BLAS product, 64 x 1000 x 1000 454 against 704."""
REPEATS = 5
_DIGEST = hashlib.sha256(Path(__file__).read_bytes() + Path(tile_ir.__file__).read_bytes())
_STEM = f"{LANES}x{ACCUMULATORS}x{_DIGEST.hexdigest()[:16]}"
_tile = tile_ir.by_vectors(tuple(rows_for(v) for v in (1, 2, 3, 4)))
"""The tile of ``vectors`` vectors (``rows_for(vectors)`` rows): ``_tile(vectors, k, s, ...)``."""
# a crew block: LO, HI (tiles), then N, K, M, vectors and the addresses of W, x.T and out
N_AT, K_AT, M_AT, VECTORS_AT, W_AT, XT_AT, OUT_AT = range(2, 9)


def _kernel(py_func: Any) -> Any:
    # compiled as the fixed kernels are, machine code in the signed kernels store
    return numba_cache.cached_njit(py_func, f"k_thingemm{py_func.__name__}_{_STEM}")


@_kernel
def pack(x: np.ndarray, xt: np.ndarray) -> None:  # pragma: no cover - runs compiled
    """``xt[:, :M] = x.T`` in blocks of 16 columns of x (a block of xt's rows stays cached)."""
    m, k = x.shape
    for k0 in range(0, k, 16):
        for i in range(m):
            for j in range(k0, min(k0 + 16, k)):
                xt[j, i] = x[i, j]


@_kernel
def tiles(w, xt, out, vectors, lo, hi):  # pragma: no cover - runs compiled
    """Tiles ``lo..hi`` of ``out = (xt[:, :M].T) @ w.T``: tile t is W's rows from
    ``t * rows_for(vectors)``, computed into a block, then written out by columns."""
    n, k = w.shape
    m, width = out.shape[0], xt.shape[1]
    rows = ACCUMULATORS // vectors
    block = np.empty(rows * width, np.float32)
    at_w, at_xt = np.int64(w.ctypes.data), np.int64(xt.ctypes.data)  # numba's are unsigned
    at_block = np.int64(block.ctypes.data)
    for t in range(lo, hi):
        j0 = t * rows
        count = min(rows, n - j0)
        if count < rows:  # the last tile, where N is no multiple of its rows: zeros pad it
            pad = np.zeros((rows, k), np.float32)
            pad[:count] = w[j0:n]
            _tile(vectors, k, np.int64(pad.ctypes.data), k, at_xt, width, at_block, width)
        else:
            _tile(vectors, k, at_w + j0 * k * 4, k, at_xt, width, at_block, width)
        for r in range(count):
            for i in range(m):
                out[i, j0 + r] = block[r * width + i]


@_kernel
def entry(block: np.ndarray) -> None:  # pragma: no cover - runs compiled, on a crew's worker
    """``tiles`` over a crew share ``[block[LO], block[HI])``."""
    n, k, m, vectors = block[N_AT], block[K_AT], block[M_AT], block[VECTORS_AT]
    w = numba.carray(as_voidptr(block[W_AT]), (n, k), np.float32)
    xt = numba.carray(as_voidptr(block[XT_AT]), (k, vectors * LANES), np.float32)
    out = numba.carray(as_voidptr(block[OUT_AT]), (m, n), np.float32)
    tiles(w, xt, out, vectors, block[LO], block[HI])


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``a @ b`` for float32 ``a`` (M, K) and ``b`` (K, N) with ``a`` and ``b.T`` C-ordered,
    M at most ``4 * LANES`` (into ``out``, C-ordered, when given): ``a`` packed transposed,
    then the tiles, split over the native crew where one is free and the product is large.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> x, w = (rng.standard_normal(shape, np.float32) for shape in ((5, 70), (9, 70)))
        >>> bool(np.allclose(matmul(x, w.T), x @ w.T, rtol=1e-5, atol=1e-5))
        True
    """
    m, k = a.shape
    w = b.T
    vectors = -(-m // LANES)
    xt = np.zeros((k, vectors * LANES), np.float32)
    pack(a, xt)
    out = np.empty((m, w.shape[0]), np.float32) if out is None else out
    count = -(-w.shape[0] // rows_for(vectors))
    crew = native_crew.crew()
    if crew is not None and batched_native.split_pays(crew, 2 * m * k * w.shape[0]):
        addresses = (w.ctypes.data, xt.ctypes.data, out.ctypes.data)
        block = np.array([0, count, w.shape[0], k, m, vectors, *addresses], np.int64)
        if crew_ranges.run(crew, crew_ranges.entry_at(entry), block):
            return out
    tiles(w, xt, out, vectors, 0, count)
    return out


def takes(a: Any, b: Any, out: Any = None) -> bool:
    """Whether ``matmul`` takes this product, here: numpy float32 ``a`` (M, K) C-ordered, ``b``
    (K, N) whose transpose is C-ordered, ``1 <= M <= row_limit(K)``, K and N at least
    ``MIN_SIDE``, ``out`` None or a C-ordered float32 (M, N) array. Every numpy product asks
    (eager dispatch and plans): the cheapest refusals come first.

    Example:
        >>> a, w = np.ones((4, 64), np.float32), np.ones((80, 64), np.float32)
        >>> takes(a, w.T) == (row_limit(64) >= 4), takes(a, w.T.copy())
        (True, False)
    """
    if type(a) is not np.ndarray or type(b) is not np.ndarray or a.ndim != 2 or b.ndim != 2:
        return False
    (m, k), n = a.shape, b.shape[1]
    if not 1 <= m <= 4 * LANES or min(k, n) < MIN_SIDE:
        return False
    if a.dtype != np.float32 or b.dtype != np.float32 or b.strides != (4, 4 * k):
        return False  # (the strides of W.T with W (N, K) C-ordered)
    if not a.flags.c_contiguous or m > row_limit(k):
        return False
    if out is None:
        return True
    if out.dtype != np.float32 or not out.flags.c_contiguous or out.shape != (m, n):
        return False
    # the tiles write out while they read the operands: numpy's matmul copies an overlapping
    # operand, the route leaves such a call to it
    return not (np.may_share_memory(out, a) or np.may_share_memory(out, b))


def scratch_bytes(m: int, k: int) -> int:
    """Bytes ``matmul`` allocates for ``m`` rows of ``k``: the packed ``x.T`` and each part's
    tile block and padded rows (one part a thread).

    Example:
        >>> scratch_bytes(64, 1000) >= 1000 * 64 * 4, scratch_bytes(0, 8) > 0
        (True, True)
    """
    vectors = max(1, -(-m // LANES))  # an empty x still packs a vector's width
    rows, width = rows_for(vectors), vectors * LANES
    return 4 * (k * width + cpu_threads.threads() * rows * (width + k))


def measure(
    probe: tuple[int, int], transposed_up_to: int, candidates: tuple[int, ...] = CANDIDATES
) -> dict:
    """The time of the route ``gemm.matmul`` takes without the tiles over the tiles' for a
    float32 ``(rows, K) @ (N, K).T`` per row count, both on one thread (OpenBLAS lowered to
    one, the tiles unsplit): ``(W @ x.T)`` and its C-ordered copy up to ``transposed_up_to``
    rows (``thin_rows``), the direct product above.

    Example:
        >>> sorted(measure((64, 16), 0, (8,)))
        [8]
    """
    k, n = probe
    rng = np.random.default_rng(0)
    w = rng.standard_normal((n, k), dtype=np.float32)
    ratios = {}
    with one_blas_thread():
        for rows in candidates:
            x = rng.standard_normal((rows, k), dtype=np.float32)
            vectors = -(-rows // LANES)
            xt, out = np.zeros((k, vectors * LANES), np.float32), np.empty((rows, n), np.float32)
            count = -(-n // rows_for(vectors))

            def ours(x=x, xt=xt, out=out, vectors=vectors, count=count) -> None:
                pack(x, xt)
                tiles(w, xt, out, vectors, 0, count)

            def blas(x=x, out=out, transposed=rows <= transposed_up_to) -> None:
                if transposed:
                    np.ascontiguousarray(np.matmul(w, x.T).T)
                else:
                    np.matmul(x, w.T, out=out)

            before, tiled = best_of((blas, ours), REPEATS)
            ratios[rows] = before / tiled
    return ratios


def _read(record: object) -> tuple[int, ...] | None:
    """The row counts of a cache record, one a probe, or None when it is not one (measured
    again)."""
    rows = record.get("rows") if isinstance(record, dict) else None
    if not isinstance(rows, list) or len(rows) != len(PROBES):
        return None
    return tuple(rows) if all(r in (0, *CANDIDATES) for r in rows) else None


def _record() -> dict:
    # the ratios are kept with the counts: what a reader of the cache can check them against
    ratios = [measure(probe, thin_rows()) for probe in PROBES]
    return {
        "rows": [choose(r) for r in ratios],
        "probes": PROBES,
        "ratios": [{str(rows): q for rows, q in r.items()} for r in ratios],
    }


_ROWS = PerMachine(
    "thin_gemm_rows", _record, _read, (0,) * len(PROBES), key_facts=lambda: (LANES, _STEM)
)


_BETWEEN = [math.sqrt(a[0] * b[0]) for a, b in itertools.pairwise(PROBES)]
"""The K where one probe's K stops being the nearest (on a log scale) and the next one's is."""


def row_limit(k: int) -> int:
    """The largest row count this machine runs faster by the tiles for products of K = ``k``:
    ``thin_rows.choose`` of ``measure`` at the probe nearest ``k`` (on a log scale), 0: never.
    Read from the kernels cache or measured once a machine; 0 under
    ``DUALFLOW_MACHINE_CONSTANTS=defaults``.

    Example:
        >>> row_limit(1000) in (0, *CANDIDATES), row_limit(64) in (0, *CANDIDATES)
        (True, True)
    """
    return _ROWS.get()[bisect.bisect(_BETWEEN, k)]


def max_rows() -> int:
    """The largest row count any K takes the tiles for (``row_limit``'s largest).

    Example:
        >>> max_rows() == max(row_limit(p[0]) for p in PROBES)
        True
    """
    return max(_ROWS.get())


def forget() -> None:
    """Drop this process's counts: the next ``row_limit`` reads (or measures) them again.

    Example:
        >>> before = max_rows(); forget(); max_rows() == before
        True
    """
    _ROWS.forget()


def warm() -> None:
    """Compile (so store) ``pack``, ``tiles`` and the crew's ``entry``, one signature each.

    Example:
        >>> warm(); len(tiles.signatures), len(entry.signatures)
        (1, 1)
    """
    x, w = np.ones((1, MIN_SIDE), np.float32), np.ones((MIN_SIDE, MIN_SIDE), np.float32)
    xt = np.zeros((MIN_SIDE, LANES), np.float32)
    pack(x, xt)
    tiles(w, xt, np.empty((1, MIN_SIDE), np.float32), 1, 0, 1)
    crew_ranges.entry_at(entry)
    crew_ranges.warm()
