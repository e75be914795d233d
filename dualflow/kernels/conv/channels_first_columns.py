"""Convolutions of few input channels (a network's first layer) on numpy: channels-first columns.

With C * kh * kw small (an RGB image's 27 taps), ``conv_gemm``'s channels-last columns copy runs
of C = 3 values and its result needs a full NCHW transpose. Here the columns are (taps, pixels):
each tap row is a shifted copy of one input plane (runs of W values), the GEMM is
w (O, taps) @ columns, whose (O, n, Ho*Wo) result becomes NCHW by a copy of whole planes, and
the weight gradient is gy (O, pixels) @ columns^T, already in OIHW order (no weight reorder).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from dualflow.kernels.base.cpu_threads import parts_for, run_parts, split
from dualflow.kernels.conv.column_copies import PART_MIN_BYTES, available, numba_kernel, part_bytes

MAX_CHANNELS = 4
"""Input channels (one group) up to which a convolution takes these kernels."""

COLUMN_BUDGET = 1 << 24
"""Bytes of columns one chunk of images may take (below glibc's mmap threshold)."""

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
    """Channels-first columns (C*kh*kw, n, Ho, Wo) of x (n, C, H, W); ``geometry`` is
    (stride, pad, dilation).

    Example:
        >>> x = np.arange(9.0).reshape(1, 1, 3, 3)
        >>> columns(x, (2, 2), ((1, 1), (0, 0), (1, 1)), (2, 2))[:, 0].reshape(4, 4)[3].tolist()
        [4.0, 5.0, 7.0, 8.0]
    """
    (sh, sw), (ph, pw), (dh, dw) = geometry
    n = x.shape[0]
    col = np.empty((x.shape[1] * ksize[0] * ksize[1], n, *out_hw), x.dtype)
    kernel = numba_kernel("columns_first", _columns)
    parts = split(n, parts_for(col.nbytes, part_bytes(PART_MIN_BYTES)))
    args = (ksize[1], sh, sw, ph, pw, dh, dw)
    run_parts([functools.partial(kernel, col, x, a, b, *args) for a, b in parts])
    return col


def _chunks(n: int, per_image: int) -> list[tuple[int, int]]:
    step = max(1, min(n, COLUMN_BUDGET // max(1, per_image)))
    return [(a, min(n, a + step)) for a in range(0, n, step)]


def conv2d(x: Any, w: Any, geometry: tuple, out_hw: tuple) -> Any:
    """Cross-correlation of x (n, C, H, W) with w (O, C, kh, kw): (n, O, Ho, Wo); ``geometry``
    is (stride, pad, dilation), ``out_hw`` the output's (Ho, Wo).

    Example:
        >>> x = np.arange(16.0).reshape(1, 1, 4, 4)
        >>> conv2d(x, np.ones((1, 1, 2, 2)), ((2, 2), (0, 0), (1, 1)), (2, 2)).tolist()
        [[[[10.0, 18.0], [42.0, 50.0]]]]
    """
    n, o, pixels = x.shape[0], w.shape[0], out_hw[0] * out_hw[1]
    taps = w.reshape(o, -1)  # (O, C*kh*kw): the columns' order, no reorder
    out = np.empty((n, o, pixels), x.dtype)
    for a, b in _chunks(n, taps.shape[1] * pixels * x.dtype.itemsize):
        col = columns(x[a:b], w.shape[2:], geometry, out_hw)
        y = np.matmul(taps, col.reshape(col.shape[0], -1))  # (O, images * pixels)
        out[a:b] = y.reshape(o, b - a, pixels).transpose(1, 0, 2)  # copies of whole planes
        del col, y  # before the next chunk's (the scratch fact counts one)
    return out.reshape(n, o, *out_hw)


def conv2d_grad_weight(x: Any, gy: Any, ksize: tuple, geometry: tuple) -> Any:
    """Weight gradient of ``conv2d``: x (n, C, H, W), gy (n, O, Ho, Wo) -> (O, C, kh, kw); the
    chunks' products are added in a fixed order.

    Example:
        >>> x, gy = np.ones((1, 1, 3, 3)), np.ones((1, 1, 2, 2))
        >>> conv2d_grad_weight(x, gy, (2, 2), ((1, 1), (0, 0), (1, 1))).tolist()
        [[[[4.0, 4.0], [4.0, 4.0]]]]
    """
    (n, o), pixels = gy.shape[:2], gy.shape[2] * gy.shape[3]
    k = x.shape[1] * ksize[0] * ksize[1]
    total = None  # (O, C*kh*kw)
    for a, b in _chunks(n, k * pixels * x.dtype.itemsize):
        col = columns(x[a:b], ksize, geometry, gy.shape[2:])
        g = np.ascontiguousarray(gy[a:b].reshape(b - a, o, pixels).transpose(1, 0, 2))
        part = np.matmul(g.reshape(o, -1), col.reshape(k, -1).T)
        del col, g
        total = part if total is None else np.add(total, part, out=total)
        del part
    return total.reshape(o, x.shape[1], *ksize)


def conv2d_scratch(x: tuple, w: tuple, out_hw: tuple, item: int) -> int:
    """Bytes ``conv2d`` holds besides its inputs and result: one chunk's columns and product.

    Example:
        >>> conv2d_scratch((2, 3, 8, 8), (4, 3, 3, 3), (8, 8), 4)  # (27 + 4) * 2 * 64 floats
        15872
    """
    pixels, k = out_hw[0] * out_hw[1], x[1] * w[2] * w[3]
    (a, b), *_ = _chunks(x[0], k * pixels * item)
    return (k + w[0]) * (b - a) * pixels * item


def conv2d_grad_weight_scratch(x: tuple, gy: tuple, ksize: tuple, item: int) -> int:
    """Bytes ``conv2d_grad_weight`` holds besides its inputs and result: one chunk's columns and
    channels-first gradient, and the running and chunk sums.

    Example:
        >>> conv2d_grad_weight_scratch((2, 3, 8, 8), (2, 4, 8, 8), (3, 3), 4)
        16736
    """
    pixels, k, o = gy[2] * gy[3], x[1] * ksize[0] * ksize[1], gy[1]
    (a, b), *_ = _chunks(x[0], k * pixels * item)
    return (k + o) * (b - a) * pixels * item + 2 * o * k * item
