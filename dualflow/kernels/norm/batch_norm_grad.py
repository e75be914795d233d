"""Training batch norm's backward over (N, C, ...) numpy arrays: each channel's two gradient
sums and the input's gradient in one numba kernel (``ops.batch_norm_grad``'s forward).

Written with ops, the backward is a sum of ``gy``, a product and its sum, and an elementwise
expression reading ``gy`` and ``x`` again: in the ResNet-18 plan 77 fused kernels and 37 sums,
16 ms a step. The kernel reads a channel's ``gy`` and ``x`` twice while they sit in the cache
(the sums, then the gradient) and writes the gradient once. With ``s = rsqrt(var + eps)`` (the
``rsqrt`` op's bits, computed per channel before the kernel) and ``xhat = (x - mean) * s``
rounded in x's dtype: ``gbeta = Σ gy`` and ``ggamma = Σ gy xhat`` accumulate in float64 (the
products are exact there), vectorized (``reassoc`` on the sums alone), each rounded once; then
``gx = (gamma s) ((gy - gbeta / n) - xhat (ggamma / n))`` with every operation rounded in x's
dtype, in the order the ops' form computes it. Eager and compiled plans call this same kernel,
so they agree bit for bit; the inputs are made C-ordered first, so the bits never depend on
their layout. Channels are split into ranges over the native crew where its split pays
(``crew_rows``), else over ``cpu_threads`` for large inputs; each channel is one part's alone,
so results never depend on the split.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numba
import numpy as np

from dualflow.kernels.base.crew_ranges import HI, LO
from dualflow.kernels.base.native_calls import as_voidptr
from dualflow.kernels.norm import crew_rows
from dualflow.kernels.norm.batch_norm import channel_kernel, run_over_channels

DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
# numba_cache's key covers a kernel's own bytecode, not the functions it calls: this digest of
# the module's source stands for them
_DIGEST = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
_KERNELS: dict[np.dtype, Any] = {}


def covers(gy: Any, x: Any, gamma: Any, mean: Any, var: Any) -> bool:
    """Whether the kernel takes these arrays: numpy (N, C, ...) ``gy`` and ``x`` of one shape with
    at least one axis after C, all five float32 or all float64 (the forward kernel's cases).

    Example:
        >>> x, c = np.zeros((2, 3, 4), np.float32), np.ones(3, np.float32)
        >>> covers(x, x, c, c, c), covers(x[:, :, 0], x[:, :, 0], c, c, c)
        (True, False)
    """
    arrays = (gy, x, gamma, mean, var)
    return (
        all(type(a) is np.ndarray for a in arrays)
        and x.ndim >= 3
        and gy.shape == x.shape
        and x.dtype in DTYPES
        and all(a.dtype == x.dtype for a in arrays)
    )


@numba.njit(error_model="numpy")
def _normalized(x: Any, mean: Any, s: Any) -> Any:  # pragma: no cover - runs compiled
    # xhat rounded in x's dtype, outside the sums' reassociation
    return (x - mean) * s


@numba.njit(error_model="numpy", fastmath={"reassoc"})
def _channel_sums(gy: Any, x: Any, ch: int, mean: Any, s: Any) -> Any:  # pragma: no cover
    # Σ gy and Σ gy xhat over one channel, in float64 (a float32 product is exact there)
    total, weighted = 0.0, 0.0
    for i in range(x.shape[0]):
        g, row = gy[i, ch], x[i, ch]
        for j in range(row.shape[0]):
            total += np.float64(g[j])
            weighted += np.float64(g[j]) * np.float64(_normalized(row[j], mean, s))
    return total, weighted


def _gradients(gy, x, gamma, mean, s, gx, ggamma, gbeta, lo, hi):  # pragma: no cover - compiled
    # channels lo..hi of (N, C, S) arrays: the sums (rounded once), then gx, each operation
    # rounded in x's dtype as the ops' form computes it
    per = x.dtype.type(1.0 / (x.shape[0] * x.shape[2]))
    for ch in range(lo, hi):
        m, sc = mean[ch], s[ch]
        total, weighted = _channel_sums(gy, x, ch, m, sc)
        gbeta[ch], ggamma[ch] = total, weighted  # stored: rounded to x's dtype
        centre, slope, scale = gbeta[ch] * per, ggamma[ch] * per, gamma[ch] * sc
        for i in range(x.shape[0]):
            g, row, out = gy[i, ch], x[i, ch], gx[i, ch]
            for j in range(row.shape[0]):
                out[j] = scale * ((g[j] - centre) - _normalized(row[j], m, sc) * slope)


def _kernel(dtype: np.dtype) -> Any:
    # the backward's kernel; the stem names this module's digest
    return channel_kernel(_KERNELS, _gradients, dtype, f"k_batchnormgrad{dtype.name}x{_DIGEST}")


N, C, S, GY, X, GAMMA, MEAN, INV_STD, GX, GGAMMA, GBETA = range(2, 13)
"""A crew block's words after ``LO``/``HI``: x's (N, C, S), then the addresses of gy, x, gamma,
mean, inv_std, gx, ggamma and gbeta."""
_ENTRIES: dict[np.dtype, Any] = {}


def _entry_build(dtype: np.dtype) -> Any:
    """The build of the crew's entry for ``dtype``: ``_gradients`` over the channels
    ``[block[LO], block[HI])`` of the arrays the block names."""
    gradients, scalar = _kernel(dtype), dtype.type  # built first: the lock is not reentrant

    def build() -> tuple[Any, str]:
        def entry(block):  # pragma: no cover - runs compiled, on a crew's worker
            shape, channels = (block[N], block[C], block[S]), block[C]
            gy = numba.carray(as_voidptr(block[GY]), shape, scalar)
            x = numba.carray(as_voidptr(block[X]), shape, scalar)
            gamma = numba.carray(as_voidptr(block[GAMMA]), (channels,), scalar)
            mean = numba.carray(as_voidptr(block[MEAN]), (channels,), scalar)
            inv_std = numba.carray(as_voidptr(block[INV_STD]), (channels,), scalar)
            gx = numba.carray(as_voidptr(block[GX]), shape, scalar)
            ggamma = numba.carray(as_voidptr(block[GGAMMA]), (channels,), scalar)
            gbeta = numba.carray(as_voidptr(block[GBETA]), (channels,), scalar)
            lo, hi = block[LO], block[HI]
            gradients(gy, x, gamma, mean, inv_std, gx, ggamma, gbeta, lo, hi)

        kernel = numba.njit(nogil=True, cache=False, error_model="numpy")(entry)
        return kernel, f"k_batchnormgradentry{dtype.name}x{_DIGEST}"

    return build


def backward(
    gy: np.ndarray, x: np.ndarray, gamma: np.ndarray, mean: np.ndarray, inv_std: np.ndarray
) -> tuple:
    """``(gx, ggamma, gbeta)`` of training batch norm for the output's gradient ``gy``, given the
    batch ``mean`` and ``inv_std = rsqrt(var + eps)`` per channel (``covers``; inv_std in x's
    dtype).

    Example:
        >>> x = np.arange(8.0).reshape(2, 2, 2)
        >>> gx, ggamma, gbeta = backward(np.ones_like(x), x, np.ones(2), np.array([2.5, 4.5]),
        ...                              np.array([0.5, 0.5]))
        >>> gbeta.tolist(), ggamma.tolist(), float(abs(gx).max())
        ([4.0, 4.0], [0.0, 0.0], 0.0)
    """
    gy, x = np.ascontiguousarray(gy), np.ascontiguousarray(x)
    n, channels = x.shape[:2]
    rows = x.reshape(n, channels, -1)
    gx = np.empty_like(x)
    ggamma, gbeta = np.empty(channels, x.dtype), np.empty(channels, x.dtype)
    gamma, mean, inv_std = (np.ascontiguousarray(a) for a in (gamma, mean, inv_std))
    args = (gy.reshape(rows.shape), rows, gamma, mean, inv_std, gx.reshape(rows.shape))
    args += (ggamma, gbeta)

    def operands() -> list:
        return [*rows.shape, *args]

    # the kernel moves about two copies' bytes (its second reads hit the cache)
    if not crew_rows.run(_ENTRIES, x.dtype, _entry_build, operands, channels, 2 * x.size):
        run_over_channels(_kernel(x.dtype), args, channels, 2 * x.size)
    return gx, ggamma, gbeta
