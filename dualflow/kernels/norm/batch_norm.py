"""Training batch norm's forward over (N, C, ...) numpy arrays: each channel's mean, biased
variance and normalized output in one numba kernel (``ops.batch_norm``'s forward).

Written with numpy, the forward is ~6 passes over the activations on one thread (a strided
mean, a subtraction, a square, another mean, a scale, a shift): 1.05 ms for a 16 x 64 x 32 x 32
float32 input here. The kernel reads a channel's values three times while they sit in the cache
(sum, sum of squared deviations, output) and writes the output once: 0.23 ms. Sums accumulate
in float64, vectorized (``reassoc`` on the two sums alone, never on the output's arithmetic),
and each result is rounded once: the mean and variance to x's dtype, then ``(x - mean) * scale
+ beta`` with every operation rounded in x's dtype, as the numpy form does. Eager and compiled
plans call this same kernel, so they agree bit for bit; the input is made C-ordered first, so the
bits never depend on its memory layout. Channels are split into ranges over the native crew
where its split pays (``crew_rows``), else over ``cpu_threads`` for large inputs; each channel
is one part's alone, so results never depend on the split.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numba
import numpy as np

from dualflow.kernels.base import numba_cache
from dualflow.kernels.base.cpu_threads import parts_for, run_parts, split
from dualflow.kernels.base.crew_ranges import HI, LO
from dualflow.kernels.base.machine_constants import machine_constants
from dualflow.kernels.base.native_calls import as_voidptr
from dualflow.kernels.norm import crew_rows

DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
# numba_cache's key covers a kernel's own bytecode, not the functions it calls: this digest of
# the module's source stands for them
_DIGEST = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
_KERNELS: dict[np.dtype, Any] = {}


def covers(x: Any, gamma: Any, beta: Any) -> bool:
    """Whether the kernel takes these arrays: numpy (N, C, ...) inputs with at least one axis
    after C, and x, gamma and beta all float32 or all float64. (N, C) inputs stay numpy's: a
    channel's values are strided there, and numpy's column means read them in order.

    Example:
        >>> g, f32 = np.ones(3, np.float32), np.float32
        >>> covers(np.zeros((2, 3, 4), f32), g, g), covers(np.zeros((2, 3), f32), g, g)
        (True, False)
        >>> covers(np.zeros((2, 3, 4)), g, g)
        False
    """
    arrays = (x, gamma, beta)
    return (
        all(type(a) is np.ndarray for a in arrays)
        and x.ndim >= 3
        and x.dtype in DTYPES
        and gamma.dtype == beta.dtype == x.dtype
    )


# reassociation for these sums alone (their adds become vector lanes), never for the output's
# arithmetic; fixed machine code, so fixed bits on a machine
@numba.njit(error_model="numpy", fastmath={"reassoc"})
def channel_sum(x: Any, ch: int) -> Any:  # pragma: no cover - runs compiled
    """Channel ``ch`` of (N, C, S) ``x`` summed into float64 (vectorized; ``channel_sums``'
    bias gradients share it).

    Example:
        >>> float(channel_sum(np.ones((2, 3, 4), np.float32), 1))
        8.0
    """
    total = 0.0
    for i in range(x.shape[0]):
        row = x[i, ch]
        for j in range(row.shape[0]):
            total += np.float64(row[j])
    return total


@numba.njit(error_model="numpy", fastmath={"reassoc"})
def _channel_squares(x: Any, ch: int, mean: Any) -> Any:  # pragma: no cover - runs compiled
    total = 0.0
    for i in range(x.shape[0]):
        row = x[i, ch]
        for j in range(row.shape[0]):
            d = np.float64(row[j] - mean)  # the deviation rounded as numpy's x - mean is
            total += d * d
    return total


def _normalize(x, gamma, beta, eps, y, mean, var, lo, hi):  # pragma: no cover - runs compiled
    # channels lo..hi of (N, C, S) x: mean and biased variance (rounded once from float64
    # sums), then y = (x - mean) * scale + beta, each operation rounded in x's dtype
    count = x.shape[0] * x.shape[2]
    for ch in range(lo, hi):
        mean[ch] = channel_sum(x, ch) / count  # stored: rounded to x's dtype
        m = mean[ch]
        var[ch] = _channel_squares(x, ch, m) / count
        scale = gamma[ch] / np.sqrt(var[ch] + eps)
        shift = beta[ch]
        for i in range(x.shape[0]):
            row, out = x[i, ch], y[i, ch]
            for j in range(row.shape[0]):
                out[j] = (row[j] - m) * scale + shift


def channel_kernel(table: dict, py_func: Any, dtype: np.dtype, stem: str) -> Any:
    """``py_func`` (a kernel over a channel range ``lo, hi``) for ``dtype``, built once per
    process into ``table``, its machine code in the signed kernels store as ``stem``.

    Example:
        >>> f32, stem = np.dtype("float32"), f"k_batchnormfloat32x{_DIGEST}"
        >>> channel_kernel(_KERNELS, _normalize, f32, stem) is _kernel(f32)
        True
    """

    def build() -> tuple[Any, str]:
        return numba.njit(nogil=True, cache=False, error_model="numpy")(py_func), stem

    return numba_cache.built_once(table, dtype, build)


def run_over_channels(kernel: Any, args: tuple, channels: int, copied: int) -> None:
    """``kernel(*args, lo, hi)`` over ``[0, channels)``, split into channel ranges over
    ``cpu_threads`` when it moves ``copied`` elements' worth of a copy's bytes or more per part
    (each channel is one part's alone, so the results never depend on the split).

    Example:
        >>> seen = []
        >>> run_over_channels(lambda lo, hi: seen.append((lo, hi)), (), 3, 1)
        >>> seen
        [(0, 3)]
    """
    parts = min(channels, parts_for(copied, machine_constants().part_min_for(1.0)))
    if parts == 1:
        kernel(*args, 0, channels)
    else:
        run_parts([lambda lo=lo, hi=hi: kernel(*args, lo, hi) for lo, hi in split(channels, parts)])


def _kernel(dtype: np.dtype) -> Any:
    # the forward's kernel; the stem names this module's digest
    return channel_kernel(_KERNELS, _normalize, dtype, f"k_batchnorm{dtype.name}x{_DIGEST}")


N, C, S, X, GAMMA, BETA, EPS, Y, MEAN, VAR = range(2, 12)
"""A crew block's words after ``LO``/``HI``: x's (N, C, S), then the addresses of x, gamma,
beta, eps (a one-element array), y, mean and var."""
_ENTRIES: dict[np.dtype, Any] = {}


def _entry_build(dtype: np.dtype) -> Any:
    """The build of the crew's entry for ``dtype``: ``_normalize`` over the channels
    ``[block[LO], block[HI])`` of the arrays the block names."""
    normalize, scalar = _kernel(dtype), dtype.type  # built first: the lock is not reentrant

    def build() -> tuple[Any, str]:
        def entry(block):  # pragma: no cover - runs compiled, on a crew's worker
            shape, channels = (block[N], block[C], block[S]), block[C]
            x = numba.carray(as_voidptr(block[X]), shape, scalar)
            gamma = numba.carray(as_voidptr(block[GAMMA]), (channels,), scalar)
            beta = numba.carray(as_voidptr(block[BETA]), (channels,), scalar)
            eps = numba.carray(as_voidptr(block[EPS]), (1,), scalar)[0]
            y = numba.carray(as_voidptr(block[Y]), shape, scalar)
            mean = numba.carray(as_voidptr(block[MEAN]), (channels,), scalar)
            var = numba.carray(as_voidptr(block[VAR]), (channels,), scalar)
            normalize(x, gamma, beta, eps, y, mean, var, block[LO], block[HI])

        kernel = numba.njit(nogil=True, cache=False, error_model="numpy")(entry)
        return kernel, f"k_batchnormentry{dtype.name}x{_DIGEST}"

    return build


def forward(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> tuple:
    """``(y, mean, var)`` of training batch norm over every axis of ``x`` but 1: y in x's shape,
    mean and biased variance (C,), all in x's dtype (``covers``).

    Example:
        >>> x = np.arange(8.0).reshape(2, 2, 2)
        >>> y, mean, var = forward(x, np.ones(2), np.zeros(2), 0.0)
        >>> mean.tolist(), var.tolist(), y[0, 0].round(4).tolist()
        ([2.5, 4.5], [4.25, 4.25], [-1.2127, -0.7276])
    """
    x = np.ascontiguousarray(x)
    n, channels = x.shape[:2]
    rows = x.reshape(n, channels, -1)
    y = np.empty_like(x)
    mean, var = np.empty(channels, x.dtype), np.empty(channels, x.dtype)
    eps_x = x.dtype.type(eps)  # added in x's dtype, as numpy adds a Python float to float32
    gamma, beta = np.ascontiguousarray(gamma), np.ascontiguousarray(beta)
    args = (rows, gamma, beta, eps_x, y.reshape(rows.shape), mean, var)

    def operands() -> list:
        return [*rows.shape, rows, gamma, beta, np.full(1, eps_x), y, mean, var]

    # a copy's split threshold: the kernel moves a copy's bytes (its other reads hit the cache)
    if not crew_rows.run(_ENTRIES, x.dtype, _entry_build, operands, channels, x.size):
        run_over_channels(_kernel(x.dtype), args, channels, x.size)
    return y, mean, var
