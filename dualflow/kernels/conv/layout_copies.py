"""numba copies between NCHW and (padded) channels-last layouts for the CPU convolutions.

``conv_gemm`` works on channels-last images and returns NCHW: numpy's ``ascontiguousarray`` of
a transposed view walks the whole array with a large stride (2-3 ms for 4 MB); these loops copy
one image at a time, so both sides of the copy stay in cache, with images split over
``cpu_threads`` parts. Pure copies: the values are exactly numpy's.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from dualflow.kernels.base.cpu_threads import parts_for, run_parts, split
from dualflow.kernels.conv.column_copies import PART_MIN_BYTES, by_images, numba_kernel, part_bytes
from dualflow.kernels.linalg.tiles import FINGERPRINT, to_fm, to_rows

U = np.uint64  # unsigned indices: no negative-index wraparound, which kept LLVM from vectorizing
BLOCK = 64  # output channels per block: one run of writes (reads) per tap and input channel


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
        for r in range(h):  # row by row in 16-wide tiles: see ``_rows_in`` of winograd_loops
            to_fm(x[b, :, r, :], out[b, r + ph, pw : pw + w, :])


def _to_channels_first(out, y):  # pragma: no cover - compiled by numba
    # out (n, C, h, w); y (n, h, w, C)
    for b in range(y.shape[0]):
        for r in range(y.shape[1]):
            to_rows(y[b, r], out[b, :, r, :])


def _filters_to_taps(out, w, o0, o1):  # pragma: no cover - compiled by numba
    # out (taps, C, O): w (O, C * taps) with taps first and output channels last, o in [o0, o1);
    # 32 x 32 tiles, so both sides of the copy stay in L1
    taps, c = out.shape[0], out.shape[1]
    for ob in range(o0, o1, 32):
        for qb in range(0, c * taps, 32):
            for q in range(qb, min(qb + 32, c * taps)):
                k, tap = U(q // taps), U(q % taps)
                for o in range(ob, min(ob + 32, o1)):
                    out[tap, k, U(o)] = w[U(o), U(q)]


def _rows_to_filters(out, g, o0, o1):  # pragma: no cover - compiled by numba
    # out (O, C * taps) from g (O, taps, C), for o in [o0, o1): each filter's (taps, C) block
    # transposed while its 18 KiB (512 channels, 3x3) stay in L1, writing runs of taps
    taps, c = g.shape[1], g.shape[2]
    for o_ in range(o0, o1):
        o = U(o_)
        for k_ in range(c):
            k, q = U(k_), U(k_ * taps)
            for tap in range(taps):
                out[o, q + U(tap)] = g[o, U(tap), k]


def _by_filters(name: str, fn: Any, out: Any, src: Any, o: int) -> None:
    """``fn(out, src, o0, o1)`` over ranges of the ``o`` output channels, on both cores."""
    kernel = numba_kernel(name, fn)
    parts = split(o, parts_for(out.nbytes, part_bytes(PART_MIN_BYTES)))
    run_parts([functools.partial(kernel, out, src, a, b) for a, b in parts])


def filters_to_taps(w: Any) -> Any:
    """w (O, C, kh, kw) as a C-ordered (kh*kw*C, O) matrix, taps first (the GEMM convolutions'
    weight); numpy's copy of that transposed view took 4.7 ms for 512x512x3x3 float32.

    Example:
        >>> filters_to_taps(np.arange(8.0).reshape(2, 1, 2, 2))
        array([[0., 4.],
               [1., 5.],
               [2., 6.],
               [3., 7.]])
    """
    o, c, kh, kw = w.shape
    out = np.empty((kh * kw, c, o), dtype=w.dtype)
    _by_filters("filters_to_taps", _filters_to_taps, out, w.reshape(o, c * kh * kw), o)
    return out.reshape(kh * kw * c, o)


def rows_to_filters(g: Any, shape: tuple) -> Any:
    """Rows (O, kh*kw*C), taps first in each row (the weight gradient's GEMM gives them), as
    C-ordered filters of ``shape`` (O, C, kh, kw): a reorder within each filter, where the
    (kh*kw*C, O) product's full transpose took 5.3-5.9 ms for 512x512x3x3 float32.

    Example:
        >>> w = np.arange(8.0).reshape(2, 1, 2, 2)
        >>> rows = np.ascontiguousarray(w.transpose(0, 2, 3, 1)).reshape(2, 4)
        >>> rows_to_filters(rows, (2, 1, 2, 2)).ravel().tolist()
        [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    """
    o, c, kh, kw = shape
    out = np.empty((o, c * kh * kw), dtype=g.dtype)
    _by_filters("rows_to_filters", _rows_to_filters, out, g.reshape(o, kh * kw, c), o)
    return out.reshape(shape)


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
    by_images(
        numba_kernel(f"to_channels_last{FINGERPRINT}", _to_channels_last), out, (x,), (ph, pw)
    )
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
    by_images(numba_kernel(f"to_channels_first{FINGERPRINT}", _to_channels_first), out, (y,), ())
    return out
