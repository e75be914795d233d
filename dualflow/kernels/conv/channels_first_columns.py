"""Convolutions of few input channels (a network's first layer) on numpy: channels-first columns.

With C * kh * kw small (an RGB image's 27 taps), ``conv_gemm``'s channels-last columns copy runs
of C = 3 values and its result needs a full NCHW transpose. Here the columns are (taps, pixels):
each tap row is a shifted copy of one input plane (runs of W values), the GEMM is
w (O, taps) @ columns, whose (O, n, Ho*Wo) result becomes NCHW by a copy of whole planes, and
the weight gradient is gy (O, pixels) @ columns^T, already in OIHW order (no weight reorder).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.kernels.base.cpu_caches import l2_bytes
from dualflow.kernels.base.cpu_threads import run_pulled_gemms, threads
from dualflow.kernels.conv.column_copies import available, numba_kernel

MAX_CHANNELS = 4
"""Input channels (one group) up to which a convolution takes these kernels."""

COLUMN_BUDGET: int | None = None
"""Bytes of columns one core's run of images makes and reads back while they are cached: half
a core's L2 (``cpu_caches.l2_bytes``; the GEMM's output and the weight share the rest) unless
set here (tests). One chunk of 16 MiB over all cores, with OpenBLAS's two threads on one GEMM of
K = 27, took 1.49 / 1.98 ms (forward / weight gradient, 32 images 3 -> 32 channels at 32x32);
runs of 128 KiB / 256 KiB / 1 MiB 1.31-1.40 / 1.06-1.17 / 0.97-1.03, on a 2-core Xeon of 2 MiB
L2, where half the L2 is the best measured."""

U = np.uint64  # unsigned indices: no negative-index wraparound, which kept LLVM from vectorizing


def _columns(col, x, b0, b1, kw, sh, sw, ph, pw, dh, dw):  # pragma: no cover - numba
    # col (C*kh*kw, n, Ho, Wo): tap (c, i, j) of every output pixel of images [b0, b1) of x
    # (n, C, H, W), zero where the tap reads the padding
    taps, h, w = col.shape[0], x.shape[2], x.shape[3]
    ho, wo = col.shape[2], col.shape[3]
    per_channel = taps // x.shape[1]
    for b in range(b0, b1):
        for k in range(taps):
            c, tap = k // per_channel, k % per_channel
            left = tap % kw * dw - pw  # the input column of output column 0
            lo = min(wo, max(0, -(left // sw)))  # the first output column inside
            hi = max(lo, min(wo, (w - 1 - left) // sw + 1))  # past the last one inside
            for y in range(ho):
                r = y * sh - ph + tap // kw * dh
                inside = 0 <= r < h
                for q in range(wo):
                    if not inside or q < lo or q >= hi:
                        col[U(k), U(b), U(y), U(q)] = 0.0
                for q in range(lo if inside else hi, hi):
                    col[U(k), U(b), U(y), U(q)] = x[U(b), U(c), U(r), U(q * sw + left)]


def takes(channels: int, groups: int) -> bool:
    """The shape rule (also the scratch facts'): one group of at most ``MAX_CHANNELS``.

    Example:
        >>> takes(3, 1), takes(5, 1), takes(4, 2)
        (True, False, False)
    """
    return groups == 1 and channels <= MAX_CHANNELS


def runs(x: Any, w: Any, groups: int) -> bool:
    """Whether ``conv_gemm`` hands conv2d(x, w) and its weight gradient to these kernels:
    ``takes``'s shape rule and numpy float32/float64 arrays of one dtype.

    Example:
        >>> runs(np.zeros((1, 3, 8, 8), np.float32), np.zeros((4, 3, 3, 3), np.float32), 1)
        True
    """
    return takes(x.shape[1], groups) and available(x, w)


def columns(x: Any, ksize: tuple, geometry: tuple, out_hw: tuple) -> Any:
    """Channels-first columns (C*kh*kw, n, Ho*Wo) of x (n, C, H, W), made on this thread;
    ``geometry`` is (stride, pad, dilation).

    Example:
        >>> x = np.arange(9.0).reshape(1, 1, 3, 3)
        >>> columns(x, (2, 2), ((1, 1), (0, 0), (1, 1)), (2, 2))[:, 0].reshape(4, 4)[3].tolist()
        [4.0, 5.0, 7.0, 8.0]
    """
    (sh, sw), (ph, pw), (dh, dw) = geometry
    n, k = x.shape[0], x.shape[1] * ksize[0] * ksize[1]
    col = np.empty((k, n, *out_hw), x.dtype)
    numba_kernel("columns_first", _columns)(col, x, 0, n, ksize[1], sh, sw, ph, pw, dh, dw)
    return col.reshape(k, n, out_hw[0] * out_hw[1])


def _runs_of_images(n: int, per_image: int) -> list[tuple[int, int]]:
    """Ranges of images whose columns fit ``COLUMN_BUDGET`` (at least one image each)."""
    budget = COLUMN_BUDGET or l2_bytes() // 2
    step = max(1, min(n, budget // max(1, per_image)))
    return [(a, min(n, a + step)) for a in range(0, n, step)]


def conv2d(x: Any, w: Any, geometry: tuple, out_hw: tuple) -> Any:
    """Cross-correlation of x (n, C, H, W) with w (O, C, kh, kw): (n, O, Ho, Wo); ``geometry``
    is (stride, pad, dilation), ``out_hw`` the output's (Ho, Wo). Each run of images is one
    core's job (``run_pulled_gemms``): its columns, then one ``w (O, taps) @ columns`` per
    image straight into that image's NCHW planes.

    Example:
        >>> x = np.arange(16.0).reshape(1, 1, 4, 4)
        >>> conv2d(x, np.ones((1, 1, 2, 2)), ((2, 2), (0, 0), (1, 1)), (2, 2)).tolist()
        [[[[10.0, 18.0], [42.0, 50.0]]]]
    """
    n, o, pixels = x.shape[0], w.shape[0], out_hw[0] * out_hw[1]
    taps = np.ascontiguousarray(w.reshape(o, -1))  # (O, C*kh*kw): the columns' order
    out = np.empty((n, o, pixels), x.dtype)
    runs = _runs_of_images(n, taps.shape[1] * pixels * x.dtype.itemsize)

    def job(i: int) -> None:
        a, b = runs[i]
        col = columns(x[a:b], w.shape[2:], geometry, out_hw)
        np.matmul(taps, col.transpose(1, 0, 2), out=out[a:b])

    run_pulled_gemms(len(runs), job)
    return out.reshape(n, o, *out_hw)


def conv2d_grad_weight(x: Any, gy: Any, ksize: tuple, geometry: tuple) -> Any:
    """Weight gradient of ``conv2d``: x (n, C, H, W), gy (n, O, Ho, Wo) -> (O, C, kh, kw). Each
    run of images is one core's job: its columns, then ``gy[b] (O, pixels) @ columns[b]^T`` per
    image, added in image order; the runs' sums are added in run order, so which core ran a
    run never changes a bit.

    Example:
        >>> x, gy = np.ones((1, 1, 3, 3)), np.ones((1, 1, 2, 2))
        >>> conv2d_grad_weight(x, gy, (2, 2), ((1, 1), (0, 0), (1, 1))).tolist()
        [[[[4.0, 4.0], [4.0, 4.0]]]]
    """
    (n, o), pixels = gy.shape[:2], gy.shape[2] * gy.shape[3]
    k = x.shape[1] * ksize[0] * ksize[1]
    g = gy.reshape(n, o, pixels)
    runs = _runs_of_images(n, k * pixels * x.dtype.itemsize)
    sums: list[Any] = [None] * len(runs)

    def job(i: int) -> None:
        a, b = runs[i]
        col = columns(x[a:b], ksize, geometry, gy.shape[2:])
        products = np.matmul(g[a:b], col.transpose(1, 2, 0))  # (images, O, C*kh*kw)
        for j in range(1, b - a):
            np.add(products[0], products[j], out=products[0])
        sums[i] = products[0]

    run_pulled_gemms(len(runs), job)
    total = sums[0]
    for part in sums[1:]:
        total = np.add(total, part, out=total)
    return total.reshape(o, x.shape[1], *ksize)


def _at_once(x: tuple, per_image: int) -> int:
    """Images whose columns (and products) exist at once: the runs that run together."""
    runs = _runs_of_images(x[0], per_image)
    return sum(b - a for a, b in runs[: max(1, threads())])


def conv2d_scratch(x: tuple, w: tuple, out_hw: tuple, item: int) -> int:
    """Bytes ``conv2d`` holds besides its inputs and result: the columns of the runs that run
    at once and the contiguous weight.

    Example:
        >>> conv2d_scratch((2, 3, 8, 8), (4, 3, 3, 3), (8, 8), 4)  # 27 x 2 x 64 floats, 4 x 27
        14256
    """
    pixels, k = out_hw[0] * out_hw[1], x[1] * w[2] * w[3]
    return (_at_once(x, k * pixels * item) * k * pixels + w[0] * k) * item


def conv2d_grad_weight_scratch(x: tuple, gy: tuple, ksize: tuple, item: int) -> int:
    """Bytes ``conv2d_grad_weight`` holds besides its inputs and result: the columns and
    per-image products of the runs that run at once, and every run's sum.

    Example:
        >>> conv2d_grad_weight_scratch((2, 3, 8, 8), (2, 4, 8, 8), (3, 3), 4)
        15120
    """
    pixels, k, o = gy[2] * gy[3], x[1] * ksize[0] * ksize[1], gy[1]
    images = _at_once(x, k * pixels * item)
    runs = len(_runs_of_images(x[0], k * pixels * item))
    return (images * (k * pixels + o * k) + runs * o * k) * item
