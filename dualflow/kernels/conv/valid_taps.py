"""Convolutions on few pixels as one GEMM per kernel tap over the pixels where the tap is valid.

im2col + one GEMM multiplies every tap of every output pixel, the taps that read the zero padding
too: at 4x4 outputs with a 3x3 kernel and padding 1 that is 31% of the multiplies (ResNet-18's
512-channel layers). Here each tap (a, b) is one GEMM over the output pixels whose input pixel
lies on the image, rows of channels-last x @ that tap's (C, O) filters, added into a
channels-last result in tap order (a fixed order, so the bits depend on shapes alone). The input
gradient is the same sum with each tap's offset negated and the (Cin, Cout) filters. With K = C
instead of 9C each GEMM is thinner, and each tap copies its pixels and adds its product, so the
route runs only where a quarter of the multiplies or more would read padding
(``MAX_VALID``). Measured: docs/design-notes.md "Vision steps, fourth session".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.kernels.base.cpu_threads import run_pulled_gemms, threads
from dualflow.kernels.base.windows import Pair
from dualflow.kernels.conv import column_copies, layout_copies

MAX_VALID = 0.75
"""The largest share of im2col's multiplies that read the image (not padding) for which the taps'
GEMMs run: their K is C instead of 9C and each tap moves its pixels twice more, which the
multiplies saved pay for from a quarter on (512 channels at 4x4, 69% valid: 11.5 against
14.8 ms forward on one core)."""

MIN_CHANNELS = 16
"""Input and output channels needed (a GEMM of K < 16 runs far below the BLAS rate)."""


def _spans(size: int, out: int, offset: int) -> tuple[int, int]:
    """Output indices [lo, hi) whose input index (output + ``offset``) lies in [0, size)."""
    return max(0, -offset), min(out, size - offset)


def valid_share(in_hw: Pair, out_hw: Pair, ksize: Pair, offsets: Pair) -> float:
    """The share of the output pixels x taps whose input pixel lies on the image (tap (a, b)
    reads input pixel (i + a - offsets[0], j + b - offsets[1]) for output (i, j)).

    Example:
        >>> round(valid_share((4, 4), (4, 4), (3, 3), (1, 1)), 3)  # (10/12)^2
        0.694
    """
    total = 0
    for a in range(ksize[0]):
        lo, hi = _spans(in_hw[0], out_hw[0], a - offsets[0])
        for b in range(ksize[1]):
            left, right = _spans(in_hw[1], out_hw[1], b - offsets[1])
            total += max(0, hi - lo) * max(0, right - left)
    return total / (out_hw[0] * out_hw[1] * ksize[0] * ksize[1])


def takes(geometry: dict, ksize: Pair, channels: Pair, in_hw: Pair, out_hw: Pair) -> bool:
    """The shape rule (also the scratch facts'): stride and dilation 1, one group, at least
    ``MIN_CHANNELS`` in and out, at most ``MAX_VALID`` of the taps on the image.

    Example:
        >>> g = {"stride": (1, 1), "pad": (1, 1), "dilation": (1, 1), "groups": 1}
        >>> takes(g, (3, 3), (512, 512), (4, 4), (4, 4)), takes(g, (3, 3), (64, 64), (32, 32),
        ...                                                     (32, 32))
        (True, False)
    """
    plain = all(tuple(geometry[k]) == (1, 1) for k in ("stride", "dilation"))
    if not plain or geometry["groups"] != 1 or min(channels) < MIN_CHANNELS:
        return False
    return valid_share(in_hw, out_hw, ksize, tuple(geometry["pad"])) <= MAX_VALID


def _accumulate(src: Any, mats: list, ksize: Pair, offsets: Pair, out_hw: Pair) -> Any:
    """y (N, Ho, Wo, D) with y[:, i, j] = the sum over taps t = (a, b), in order, of
    src[:, i + a - offsets[0], j + b - offsets[1]] @ mats[t] (Cs, D), over pixels on src.

    The taps' GEMMs run ``threads()`` at once, one a core on one OpenBLAS thread, each core
    taking the next tap when done (``run_pulled``): nine two-thread GEMMs synchronise nine times,
    which a busy machine stretches to scheduler ticks. Each is the same call as alone and the
    products are added in tap order, so the bits do not depend on the threads."""
    n, h, w, _ = src.shape
    y = np.zeros((n, *out_hw, mats[0].shape[1]), src.dtype)
    regions = {}
    for t in range(len(mats)):
        da, db = t // ksize[1] - offsets[0], t % ksize[1] - offsets[1]
        (i0, i1), (j0, j1) = _spans(h, out_hw[0], da), _spans(w, out_hw[1], db)
        if i1 > i0 and j1 > j0:
            regions[t] = (
                slice(i0, i1),
                slice(j0, j1),
                slice(i0 + da, i1 + da),
                slice(j0 + db, j1 + db),
            )
    order = list(regions)
    products: list[Any] = [None] * len(order)

    def product(k: int) -> None:
        pixels = np.ascontiguousarray(src[:, regions[order[k]][2], regions[order[k]][3]])
        products[k] = np.matmul(pixels.reshape(-1, pixels.shape[-1]), mats[order[k]])

    run_pulled_gemms(len(order), product)
    for k, t in enumerate(order):  # in tap order, whatever core computed which
        rows, cols = regions[t][:2]
        y[:, rows, cols] += products[k].reshape(n, *y[:, rows, cols].shape[1:])
        products[k] = None
    return y


def _channels_last(x: Any) -> Any:
    """A C-ordered (N, H, W, C) copy of x (N, C, H, W)."""
    return layout_copies.channels_last(x, (0, 0), 1).reshape(*x.shape[:1], *x.shape[2:], -1)


def conv2d(x: Any, w: Any, pad: Pair) -> Any:
    """Cross-correlation of x (N, C, H, W) with w (O, C, kh, kw), stride 1: (N, O, Ho, Wo).

    Example:
        >>> x = np.arange(16.0).reshape(1, 1, 4, 4)
        >>> conv2d(x, np.ones((1, 1, 3, 3)), (1, 1))[0, 0, 0].tolist()
        [10.0, 18.0, 24.0, 18.0]
    """
    o, c, kh, kw = w.shape
    out_hw = (x.shape[2] + 2 * pad[0] - kh + 1, x.shape[3] + 2 * pad[1] - kw + 1)
    # (O, taps, C): tap t's filters are rows[:, t], read transposed as (C, O) (no copy)
    rows = np.ascontiguousarray(w.reshape(o, c, kh * kw).transpose(0, 2, 1))
    mats = [rows[:, t].T for t in range(kh * kw)]
    y = _accumulate(_channels_last(x), mats, (kh, kw), pad, out_hw)
    return layout_copies.channels_first(y)


def conv_transpose2d(x: Any, w: Any, pad: Pair, out_hw: Pair) -> Any:
    """conv2d's input gradient: x (N, Cin, H, W) with w (Cin, Cout, kh, kw), stride 1, to
    ``out_hw``: output (p, q) adds x[p - a + pad, q - b + pad] @ w[:, :, a, b].

    Example:
        >>> conv_transpose2d(np.ones((1, 1, 2, 2)), np.ones((1, 1, 3, 3)), (1, 1), (2, 2))
        array([[[[4., 4.],
                 [4., 4.]]]])
    """
    cin, cout, kh, kw = w.shape
    rows = np.ascontiguousarray(w.reshape(cin, cout, kh * kw).transpose(0, 2, 1))
    mats = [rows[:, t] for t in range(kh * kw)]  # (Cin, Cout), rows of stride taps * Cout
    offsets = (kh - 1 - pad[0], kw - 1 - pad[1])
    # output (p, q) reads x at p + (pad - a): tap (a, b) as tap (kh-1-a, kw-1-b) of a kernel
    # whose offset is kh-1-pad, so the flipped list keeps the sum in a fixed order
    y = _accumulate(_channels_last(x), mats[::-1], (kh, kw), offsets, out_hw)
    return layout_copies.channels_first(y)


def runs(xp: Any, arrays: tuple, geometry: dict, shapes: tuple) -> bool:
    """Whether a convolution runs here: ``takes``'s shape rule (``shapes``: kernel, (in, out)
    channels, input and output (H, W)) on numpy arrays of one float dtype (shapes and dtypes
    only, so eager and compiled calls agree).

    Example:
        >>> g = {"stride": (1, 1), "pad": (1, 1), "dilation": (1, 1), "groups": 1}
        >>> x = np.zeros((2, 32, 4, 4), np.float32)
        >>> runs(np, (x, x), g, ((3, 3), (32, 32), (4, 4), (4, 4)))
        True
    """
    if xp is not np or not column_copies.available(*arrays):
        return False
    return takes(geometry, *shapes)


def scratch(x: tuple, channels: Pair, ksize: Pair, out_hw: Pair, item: int) -> int:
    """Bytes either direction holds besides its inputs and result: the channels-last input, the
    reordered filters, the channels-last result, every tap's product (added at the end) and the
    largest tap's pixels once for each tap computed at once (``channels``: the source's and the
    result's).

    Example:
        >>> at_once = min(threads(), 9)  # taps computed at once
        >>> scratch((2, 16, 4, 4), (16, 16), (3, 3), (4, 4), 4) == 4 * (
        ...     512 + 2304 + 512 + at_once * 512 + 9 * 512)
        True
    """
    n, (cs, cd), (h, w) = x[0], channels, x[2:]
    pixels = n * min(h, out_hw[0]) * min(w, out_hw[1])
    taps = cs * cd * ksize[0] * ksize[1]
    count = ksize[0] * ksize[1]
    at_once = min(max(1, threads()), count)  # taps whose pixels are copied at once
    images = n * h * w * cs + n * out_hw[0] * out_hw[1] * cd
    return item * (images + taps + at_once * pixels * cs + count * pixels * cd)
