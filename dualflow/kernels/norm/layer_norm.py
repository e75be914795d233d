"""Layer norm's forward over host arrays: each row's mean and reciprocal standard deviation and
its normalized, scaled and shifted values in one numba pass (``ops.layer_norm``'s forward).

Written with ops, layer norm is two row means, a centring, a square, an rsqrt and three
elementwise steps: in the Transformer LM's plan ~10 kernels a layer norm forward, each reading
the activations again. Here a row (the trailing ``gamma.ndim`` axes) is read three times while
it sits in the cache: its mean (float64 sum, vectorized: ``reassoc`` on the sum alone, rounded
once to x's dtype), its biased variance (the deviations rounded in x's dtype, squared and summed
in float64, rounded once), then ``y = ((x - mean) * rstd) * gamma + beta`` with ``rstd = 1 /
sqrt(var + eps)``, every operation rounded in x's dtype. Rows are split over the native crew
where its split pays (``crew_rows``), else over ``cpu_threads`` from the machine's ``part_min``;
each row is one part's alone, so the results never depend on the split, the thread count or the
input's layout (made C-ordered first), and eager and compiled calls run this same kernel.
"""

from __future__ import annotations

import hashlib
import math
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
_ENTRIES: dict[np.dtype, Any] = {}
ROWS, WIDTH, X, GAMMA, BETA, Y, MEAN, RSTD, EPS = range(2, 11)
"""A crew block's words after ``LO``/``HI``: the row count and width, then the addresses of x,
gamma, beta, y, mean, rstd and eps (a one-element array)."""


def covers(x: Any, gamma: Any, beta: Any) -> bool:
    """Whether the kernel takes these arrays: numpy ``x`` whose trailing axes are ``gamma``'s
    and ``beta``'s shape (at least one element a row), all three float32 or all float64.

    Example:
        >>> x, g = np.zeros((2, 3, 4), np.float32), np.ones(4, np.float32)
        >>> covers(x, g, g), covers(x, g.astype(np.float64), g), covers(x, g[:0], g[:0])
        (True, False, False)
    """
    arrays = (x, gamma, beta)
    if not all(type(a) is np.ndarray for a in arrays) or x.dtype not in DTYPES:
        return False
    k = gamma.ndim
    return (
        0 < k <= x.ndim
        and x.shape[x.ndim - k :] == gamma.shape == beta.shape
        and gamma.size > 0
        and all(a.dtype == x.dtype for a in arrays)
    )


@numba.njit(error_model="numpy", fastmath={"reassoc"})
def _row_sum(row: Any) -> Any:  # pragma: no cover - runs compiled
    # a row's sum in float64, its adds in vector lanes
    total = 0.0
    for j in range(row.shape[0]):
        total += np.float64(row[j])
    return total


@numba.njit(error_model="numpy", fastmath={"reassoc"})
def _row_squares(row: Any, mean: Any) -> Any:  # pragma: no cover - runs compiled
    total = 0.0
    for j in range(row.shape[0]):
        d = np.float64(row[j] - mean)  # the deviation rounded as numpy's x - mean is
        total += d * d
    return total


def _normalize(x, gamma, beta, eps, y, mean, rstd, lo, hi):  # pragma: no cover - compiled
    # rows lo..hi of (R, D) x: mean and rstd (each rounded once into x's dtype), then y, each
    # operation rounded in x's dtype
    width = x.shape[1]
    one = x.dtype.type(1.0)
    for r in range(lo, hi):
        row, out = x[r], y[r]
        mean[r] = _row_sum(row) / width  # stored: rounded to x's dtype
        m = mean[r]
        rstd[r] = _row_squares(row, m) / width  # the variance, rounded, then replaced
        s = one / np.sqrt(rstd[r] + eps)
        rstd[r] = s
        for j in range(width):
            out[j] = ((row[j] - m) * s) * gamma[j] + beta[j]


def _kernel(dtype: np.dtype) -> Any:
    # the forward's kernel; the stem names this module's digest
    return channel_kernel(_KERNELS, _normalize, dtype, f"k_layernorm{dtype.name}x{_DIGEST}")


def _entry_build(dtype: np.dtype) -> Any:
    """The build (``numba_cache.built_once``'s) of the crew's entry for ``dtype``: ``_normalize``
    over the rows ``[block[LO], block[HI])`` of the arrays the block names."""
    normalize, scalar = _kernel(dtype), dtype.type  # built first: the lock is not reentrant

    def build() -> tuple[Any, str]:
        def entry(block):  # pragma: no cover - runs compiled, on a crew's worker
            rows, width = block[ROWS], block[WIDTH]
            x = numba.carray(as_voidptr(block[X]), (rows, width), scalar)
            gamma = numba.carray(as_voidptr(block[GAMMA]), (width,), scalar)
            beta = numba.carray(as_voidptr(block[BETA]), (width,), scalar)
            y = numba.carray(as_voidptr(block[Y]), (rows, width), scalar)
            mean = numba.carray(as_voidptr(block[MEAN]), (rows,), scalar)
            rstd = numba.carray(as_voidptr(block[RSTD]), (rows,), scalar)
            eps = numba.carray(as_voidptr(block[EPS]), (1,), scalar)[0]
            normalize(x, gamma, beta, eps, y, mean, rstd, block[LO], block[HI])

        kernel = numba.njit(nogil=True, cache=False, error_model="numpy")(entry)
        return kernel, f"k_layernormentry{dtype.name}x{_DIGEST}"

    return build


def forward(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> tuple:
    """``(y, mean, rstd)`` of layer norm over ``x``'s trailing ``gamma.ndim`` axes: y in x's
    shape, the statistics in x's shape with those axes 1, all in x's dtype (``covers``).

    Example:
        >>> y, mean, rstd = forward(np.array([[1.0, 3.0]]), np.ones(2), np.zeros(2), 0.0)
        >>> y.tolist(), mean.tolist(), rstd.tolist()
        ([[-1.0, 1.0]], [[2.0]], [[1.0]])
    """
    x = np.ascontiguousarray(x)
    k = gamma.ndim
    stat_shape = x.shape[: x.ndim - k] + (1,) * k
    rows = x.reshape(math.prod(x.shape[: x.ndim - k]), gamma.size)
    y = np.empty_like(x)
    mean, rstd = np.empty(stat_shape, x.dtype), np.empty(stat_shape, x.dtype)
    eps_x = x.dtype.type(eps)  # added in x's dtype, as numpy adds a Python float to float32
    gamma, beta = np.ascontiguousarray(gamma).reshape(-1), np.ascontiguousarray(beta).reshape(-1)
    args = (rows, gamma, beta, eps_x, y.reshape(rows.shape), mean.reshape(-1), rstd.reshape(-1))

    def operands() -> list:
        return [*rows.shape, *args[:3], *args[4:], np.full(1, eps_x)]

    # a copy's split threshold: the kernel moves a copy's bytes (its other reads hit the cache)
    if not crew_rows.run(_ENTRIES, x.dtype, _entry_build, operands, rows.shape[0], x.size):
        run_over_channels(_kernel(x.dtype), args, rows.shape[0], x.size)
    return y, mean, rstd
