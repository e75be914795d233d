"""numba copies between NCHW and (padded) channels-last layouts for the CPU convolutions.

``conv_gemm`` works on channels-last images and returns NCHW: numpy's ``ascontiguousarray`` of
a transposed view walks the whole array with a large stride (2-3 ms for 4 MB); these loops copy
one image at a time, so both sides of the copy stay in cache, with images split over
``cpu_threads`` parts. Pure copies: the values are exactly numpy's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.kernels.columns_cpu import by_images, numba_kernel


def _to_channels_last(out, x, ph, pw):  # pragma: no cover - compiled by numba
    # out (n, h + 2ph, w + 2pw, C) zero border; x (n, C, h, w)
    n, c, h, w = x.shape
    wp = out.shape[2]
    for b in range(n):
        for r in range(out.shape[1]):
            if r < ph or r >= ph + h:
                for q in range(wp):
                    for k in range(c):
                        out[b, r, q, k] = 0
                continue
            for q in range(pw):
                for k in range(c):
                    out[b, r, q, k] = 0
                    out[b, r, wp - 1 - q, k] = 0
        for k in range(c):
            for r in range(h):
                for q in range(w):
                    out[b, r + ph, q + pw, k] = x[b, k, r, q]


def _to_channels_first(out, y):  # pragma: no cover - compiled by numba
    # out (n, C, h, w); y (n, h, w, C)
    n, h, w, c = y.shape
    for b in range(n):
        for k in range(c):
            for r in range(h):
                for q in range(w):
                    out[b, k, r, q] = y[b, r, q, k]


def channels_last(x: Any, pad: tuple, groups: int) -> Any:
    """A zero-padded channels-last copy of ``x`` (N, C, H, W): shape (N, H+2ph, W+2pw, G, C/G).

    Example:
        >>> x = np.arange(4.0).reshape(1, 1, 2, 2)
        >>> channels_last(x, (1, 0), 1)[0, :, :, 0, 0]
        array([[0., 0.],
               [0., 1.],
               [2., 3.],
               [0., 0.]])
    """
    n, c, h, w = x.shape
    (ph, pw) = pad
    out = np.empty((n, h + 2 * ph, w + 2 * pw, c), dtype=x.dtype)
    by_images(numba_kernel("to_channels_last", _to_channels_last), out, (x,), (ph, pw))
    return out.reshape(n, h + 2 * ph, w + 2 * pw, groups, c // groups)


def channels_first(y: Any) -> Any:
    """A C-ordered NCHW copy of a channels-last ``y`` (N, H, W, C).

    Example:
        >>> channels_first(np.arange(4.0).reshape(1, 1, 2, 2))[0, :, 0, :]
        array([[0., 2.],
               [1., 3.]])
    """
    n, h, w, c = y.shape
    out = np.empty((n, c, h, w), dtype=y.dtype)
    by_images(numba_kernel("to_channels_first", _to_channels_first), out, (y,), ())
    return out
