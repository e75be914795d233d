"""Layer norm's backward over host arrays: the input's gradient row by row and the weight and
bias gradients (sums over rows) in one numba pass (``ops.layer_norm_grad``'s forward).

With ``xhat = (x - mean) * rstd`` and ``g = gy * gamma`` rounded in x's dtype, a row's ``Σ g``
and ``Σ g xhat`` accumulate in float64 (vectorized: ``reassoc`` on the sums alone), each divided
by the row's width D and rounded once to ``a`` and ``b``; then ``gx = ((g - a) - xhat * b) *
rstd``, every operation rounded in x's dtype. The weight and bias gradients ``Σ gy xhat`` and
``Σ gy`` run over rows: each block of ``block_rows`` consecutive rows adds its rows into its own
float64 partial sums, and the partials are added block after block, then rounded once. The
blocks are fixed by the shape, never by the thread count, so the bits are the same on one
thread or many; blocks are split over the native crew where its split pays (``crew_rows``),
else over ``cpu_threads``, and the inputs are made C-ordered first.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import numba
import numpy as np

from dualflow.kernels.base import numba_cache
from dualflow.kernels.base.crew_ranges import HI, LO
from dualflow.kernels.base.native_calls import as_voidptr
from dualflow.kernels.norm import crew_rows, layer_norm
from dualflow.kernels.norm.batch_norm import channel_kernel, run_over_channels

DTYPES = layer_norm.DTYPES
MAX_BLOCKS = 64
"""The most row blocks (float64 partial sums of the weight gradients, D each): enough parts for
any thread count, a bounded scratch (64 x 1024 x 16 bytes for a 1024-wide row)."""
MIN_BLOCK_ROWS = 16
_DIGEST = hashlib.sha256(
    Path(__file__).read_bytes() + Path(layer_norm.__file__).read_bytes()
).hexdigest()[:16]
_KERNELS: dict[np.dtype, Any] = {}
_ENTRIES: dict[np.dtype, Any] = {}
ROWS, WIDTH, BLOCKS, BLOCK, GY, X, GAMMA, MEAN, RSTD, GX, WSUM, BSUM = range(2, 14)
"""A crew block's words after ``LO``/``HI``: the row count, width, block count and rows a block,
then the addresses of gy, x, gamma, mean, rstd, gx and the two partial sums."""


def covers(gy: Any, x: Any, gamma: Any, mean: Any, rstd: Any) -> bool:
    """Whether the kernel takes these arrays: ``layer_norm.covers``' cases for ``x`` and
    ``gamma``, ``gy`` of x's shape, the statistics of x's shape with the row's axes 1, all five
    of one dtype.

    Example:
        >>> x, g = np.zeros((2, 4), np.float32), np.ones(4, np.float32)
        >>> s = np.ones((2, 1), np.float32)
        >>> covers(x, x, g, s, s), covers(x, x, g, s[:1], s)
        (True, False)
    """
    arrays = (gy, x, gamma, mean, rstd)
    if not all(type(a) is np.ndarray for a in arrays):
        return False
    if not layer_norm.covers(x, gamma, gamma):
        return False
    stat_shape = x.shape[: x.ndim - gamma.ndim] + (1,) * gamma.ndim
    return (
        gy.shape == x.shape
        and mean.shape == rstd.shape == stat_shape
        and all(a.dtype == x.dtype for a in arrays)
    )


def block_rows(rows: int) -> int:
    """Rows per block of the weight gradients' partial sums: at least ``MIN_BLOCK_ROWS``, and
    at most ``MAX_BLOCKS`` blocks (a function of the row count only: fixed bits).

    Example:
        >>> block_rows(100), block_rows(10_000)
        (16, 157)
    """
    return max(MIN_BLOCK_ROWS, -(-rows // MAX_BLOCKS))


@numba.njit(error_model="numpy")
def _terms(gy: Any, gamma: Any, x: Any, m: Any, s: Any) -> tuple:  # pragma: no cover
    # g = gy * gamma and xhat = (x - m) * s, rounded in x's dtype outside the sums'
    # reassociation
    return gy * gamma, (x - m) * s


@numba.njit(error_model="numpy", fastmath={"reassoc"})
def _row_sums(gy: Any, x: Any, gamma: Any, m: Any, s: Any) -> Any:  # pragma: no cover
    # Σ g and Σ g xhat over one row, in float64 (a product of two float32 is exact there)
    total, weighted = 0.0, 0.0
    for j in range(x.shape[0]):
        g, xhat = _terms(gy[j], gamma[j], x[j], m, s)
        total += np.float64(g)
        weighted += np.float64(g) * np.float64(xhat)
    return total, weighted


def _block_totals(partials: Any) -> Any:  # pragma: no cover - runs compiled
    # the blocks' float64 partial sums added block after block from +0.0 (never in the threads'
    # order): as numpy's ``total += partials[k]`` for k in order, without a call a block
    total = np.zeros(partials.shape[1])
    for k in range(partials.shape[0]):
        for j in range(partials.shape[1]):
            total[j] += partials[k, j]
    return total


_block_totals = numba_cache.cached_njit(_block_totals, f"k_layernormtotals_{_DIGEST}")


def _gradients(gy, x, gamma, mean, rstd, gx, wsum, bsum, block, lo, hi):  # pragma: no cover
    # blocks lo..hi of (R, D) arrays: each row's gx, and the block's partial weight sums
    rows, width = x.shape
    for k in range(lo, hi):
        wk, bk = wsum[k], bsum[k]
        wk[:] = 0.0
        bk[:] = 0.0
        for r in range(k * block, min(rows, (k + 1) * block)):
            g_row, x_row, out = gy[r], x[r], gx[r]
            m, s = mean[r], rstd[r]
            total, weighted = _row_sums(g_row, x_row, gamma, m, s)
            a, b = x.dtype.type(total / width), x.dtype.type(weighted / width)
            for j in range(width):
                g, xhat = _terms(g_row[j], gamma[j], x_row[j], m, s)
                out[j] = ((g - a) - xhat * b) * s
                wk[j] += np.float64(g_row[j]) * np.float64(xhat)
                bk[j] += np.float64(g_row[j])


def _kernel(dtype: np.dtype) -> Any:
    # the backward's kernel; the stem names this module's digest
    return channel_kernel(_KERNELS, _gradients, dtype, f"k_layernormgrad{dtype.name}x{_DIGEST}")


def _entry_build(dtype: np.dtype) -> Any:
    """The build (``numba_cache.built_once``'s) of the crew's entry for ``dtype``: ``_gradients``
    over the blocks ``[block[LO], block[HI])`` of the arrays the block names."""
    gradients, scalar = _kernel(dtype), dtype.type  # built first: the lock is not reentrant

    def build() -> tuple[Any, str]:
        def entry(block):  # pragma: no cover - runs compiled, on a crew's worker
            rows, width, blocks = block[ROWS], block[WIDTH], block[BLOCKS]
            gy = numba.carray(as_voidptr(block[GY]), (rows, width), scalar)
            x = numba.carray(as_voidptr(block[X]), (rows, width), scalar)
            gamma = numba.carray(as_voidptr(block[GAMMA]), (width,), scalar)
            mean = numba.carray(as_voidptr(block[MEAN]), (rows,), scalar)
            rstd = numba.carray(as_voidptr(block[RSTD]), (rows,), scalar)
            gx = numba.carray(as_voidptr(block[GX]), (rows, width), scalar)
            wsum = numba.carray(as_voidptr(block[WSUM]), (blocks, width), np.float64)
            bsum = numba.carray(as_voidptr(block[BSUM]), (blocks, width), np.float64)
            size = block[BLOCK]
            gradients(gy, x, gamma, mean, rstd, gx, wsum, bsum, size, block[LO], block[HI])

        kernel = numba.njit(nogil=True, cache=False, error_model="numpy")(entry)
        return kernel, f"k_layernormgradentry{dtype.name}x{_DIGEST}"

    return build


def backward(gy: np.ndarray, x: np.ndarray, gamma: np.ndarray, mean: Any, rstd: Any) -> tuple:
    """``(gx, ggamma, gbeta)`` of layer norm for the output's gradient ``gy``, given each row's
    ``mean`` and ``rstd`` (``covers``): gx in x's shape, the others in gamma's.

    Example:
        >>> x = np.array([[1.0, 3.0]])
        >>> gx, ggamma, gbeta = backward(np.array([[1.0, 0.0]]), x, np.ones(2), np.array([[2.0]]),
        ...                              np.array([[1.0]]))
        >>> gx.tolist(), ggamma.tolist(), gbeta.tolist()
        ([[0.0, 0.0]], [-1.0, 0.0], [1.0, 0.0])
    """
    gy, x = np.ascontiguousarray(gy), np.ascontiguousarray(x)
    width = gamma.size
    rows = math.prod(x.shape[: x.ndim - gamma.ndim])
    block = block_rows(rows)
    blocks = -(-rows // block)
    gx = np.empty_like(x)
    wsum, bsum = np.empty((blocks, width)), np.empty((blocks, width))
    mean, rstd = np.ascontiguousarray(mean), np.ascontiguousarray(rstd)
    args = (gy.reshape(rows, width), x.reshape(rows, width), np.ascontiguousarray(gamma).ravel())
    args += (mean.reshape(-1), rstd.reshape(-1), gx.reshape(rows, width), wsum, bsum, block)

    def operands() -> list:
        return [rows, width, blocks, block, *args[:-1]]

    # the kernel moves about two copies' bytes (its second reads hit the cache)
    if not crew_rows.run(_ENTRIES, x.dtype, _entry_build, operands, blocks, 2 * x.size):
        run_over_channels(_kernel(x.dtype), args, blocks, 2 * x.size)
    ggamma, gbeta = _block_totals(wsum), _block_totals(bsum)
    return (
        gx,
        ggamma.astype(x.dtype).reshape(gamma.shape),
        gbeta.astype(x.dtype).reshape(gamma.shape),
    )
