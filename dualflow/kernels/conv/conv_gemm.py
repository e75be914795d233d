"""Convolution kernels as one GEMM per chunk of images: channels-last columns, bounded scratch.

conv2d, its input gradient (conv_transpose2d) and its weight gradient over any array module
(numpy, cupy). The input is copied once to a padded channels-last array; columns hold one row
per output pixel, laid out (pixels, groups, kh, kw, C/groups), so every tap copies runs of
channels and one GEMM per group covers a whole chunk of images (per-image GEMMs paid the BLAS
thread wake-up once per image). Why this layout: docs/design-notes.md "CPU convolution kernels".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.kernels.backend import backend_of
from dualflow.kernels.base.windows import Pair, offsets, out_size
from dualflow.kernels.conv import (
    channels_first_columns,
    column_copies,
    layout_copies,
    pointwise_conv,
    valid_taps,
    winograd,
)

COLUMN_BUDGET = 1 << 24
"""Bytes of column scratch one chunk of images may take (the last chunk may be smaller). Below
glibc's mmap threshold (32 MiB, ``dualflow._memory``), so a chunk's columns reuse heap memory
instead of fresh pages the kernel zeroes at every call (design notes: "Winograd convolutions")."""


def _host(xp: Any) -> bool:
    """Whether dualflow's numba CPU kernels take ``xp``'s arrays (Backend's ``host_kernels``)."""
    return backend_of(xp).host_kernels


ROWS_FIRST_MIN = 1 << 16
"""Weight elements from which the weight gradient's GEMM gives (O, taps*C) rows: the (taps*C,
O) product's transpose took 5.3 ms at 512x512x3x3, the rows' reorder 1.05 (whole layer 15-20 ->
10 ms); for 16x8x3x3 filters the other GEMM order was ~1 ms faster. The forward reads the
weight as rows when it has more filters than output pixels (``_conv2d_rows``: there that GEMM
order is the faster one too, 7.4 vs 8.1 ms at 512 channels and 256 pixels)."""


def images_per_chunk(n: int, bytes_per_image: int) -> int:
    """How many of ``n`` images fit one chunk of columns (at least one).

    Example:
        >>> [images_per_chunk(n, b) for n, b in ((8, 1 << 20), (256, 1 << 20), (4, 1 << 30))]
        [8, 16, 1]
    """
    return max(1, min(n, COLUMN_BUDGET // max(1, bytes_per_image)))


def channels_last(xp: Any, x: Any, pad: Pair, groups: int) -> Any:
    """A zero-padded channels-last copy of ``x`` (N, C, H, W): shape (N, H+2ph, W+2pw, G, C/G).

    Example:
        >>> import numpy as np
        >>> channels_last(np, np.ones((1, 4, 2, 2)), (1, 0), 2).shape
        (1, 4, 2, 2, 2)
    """
    if _host(xp) and column_copies.available(x):  # image by image in cache, not one strided walk
        return layout_copies.channels_last(x, pad, groups)
    n, c, h, w = x.shape
    (ph, pw) = pad
    out = xp.zeros((n, h + 2 * ph, w + 2 * pw, groups, c // groups), dtype=x.dtype)
    out[:, ph : ph + h, pw : pw + w] = x.transpose(0, 2, 3, 1).reshape(n, h, w, groups, -1)
    return out


def _nhwc(xp: Any, x: Any) -> Any:
    """A C-ordered channels-last copy (N, H, W, C) of x (N, C, H, W)."""
    if _host(xp) and column_copies.available(x):
        return layout_copies.channels_last(x, (0, 0), 1).reshape(*x.shape[:1], *x.shape[2:], -1)
    return xp.ascontiguousarray(x.transpose(0, 2, 3, 1))


def _nchw(xp: Any, y: Any) -> Any:
    """A C-ordered NCHW copy of a channels-last y (N, H, W, C)."""
    if _host(xp) and column_copies.available(y):
        return layout_copies.channels_first(y)
    return xp.ascontiguousarray(y.transpose(0, 3, 1, 2))


def columns(xp: Any, xpad: Any, ksize: Pair, stride: Pair, dilation: Pair, out_hw: Pair) -> Any:
    """im2col of a channels-last ``xpad`` (N, Hp, Wp, G, Cg): (N, Ho, Wo, G, kh, kw, Cg).

    Example:
        >>> import numpy as np
        >>> xpad = np.arange(9.0).reshape(1, 3, 3, 1, 1)
        >>> columns(np, xpad, (2, 2), (1, 1), (1, 1), (2, 2))[0, 1, 1, 0, :, :, 0]
        array([[4., 5.],
               [7., 8.]])
    """
    if _host(xp) and column_copies.available(xpad):  # one pass in numba, not kh*kw strided ones
        return column_copies.columns(xpad, ksize, stride, dilation, out_hw)
    n, _, _, groups, cg = xpad.shape
    (kh, kw), (ho, wo) = ksize, out_hw
    col = xp.empty((n, ho, wo, groups, kh, kw, cg), dtype=xpad.dtype)
    for i, j, (rows, cols) in offsets(ksize, stride, dilation, out_hw):
        col[:, :, :, :, i, j] = xpad[:, rows, cols]
    return col


def _source(xp: Any, x: Any, ksize: Pair, pad: Pair, groups: int) -> Any:
    """What the columns are cut from: x itself for an unpadded 1x1 kernel (no full copy), else
    the padded channels-last copy."""
    if tuple(ksize) == (1, 1) and tuple(pad) == (0, 0):
        return x
    return channels_last(xp, x, pad, groups)


def _chunk_columns(xp: Any, src: Any, images: slice, geometry: tuple, groups: int) -> Any:
    """Columns (m, Ho, Wo, G, kh, kw, Cg) of the ``images`` of ``_source``'s result."""
    ksize, stride, dilation, (ho, wo) = geometry
    if src.ndim == 5:
        return columns(xp, src[images], ksize, stride, dilation, (ho, wo))
    # 1x1 without padding: the strided pixels, channels last, are the columns (one small copy).
    part = src[
        images, :, : stride[0] * (ho - 1) + 1 : stride[0], : stride[1] * (wo - 1) + 1 : stride[1]
    ]
    m, c = part.shape[:2]
    part = xp.ascontiguousarray(part.transpose(0, 2, 3, 1))
    return part.reshape(m, ho, wo, groups, 1, 1, c // groups)


def conv_out_hw(x_hw: tuple, ksize: Pair, stride: Pair, pad: Pair, dilation: Pair) -> Pair:
    """The (H, W) of a convolution's result.

    Example:
        >>> conv_out_hw((32, 32), (3, 3), (2, 2), (1, 1), (1, 1))
        (16, 16)
    """
    return tuple(out_size(x_hw[k], ksize[k], stride[k], pad[k], dilation[k]) for k in range(2))


def _rows(col: Any, groups: int) -> Any:
    """Columns as a (G, pixels, kh*kw*Cg) stack of row blocks (a view, no copy)."""
    taps = col.shape[4] * col.shape[5] * col.shape[6]
    return col.reshape(-1, groups, taps).transpose(1, 0, 2)


def _winograd(
    xp: Any, arrays: tuple, geometry: dict, ksize: Pair, channels: Pair, out: tuple
) -> bool:
    """Whether the Winograd kernels (``winograd``) take this convolution: numpy arrays the
    numba loops take, and ``winograd.runs``'s shape rule (``out``: output (H, W) and batch).
    """
    runs = winograd.runs(geometry, ksize, channels, out[:2], out[2])
    return runs and _host(xp) and column_copies.available(*arrays)


def _taps_first(xp: Any, w: Any, groups: int) -> Any:
    """The weight (O, C/G, kh, kw) in the columns' order: (G, kh*kw*C/G, O/G), C-ordered."""
    o, cg, kh, kw = w.shape
    if groups == 1 and _host(xp) and column_copies.available(w):  # numpy's copy: 4.7 ms at 512^2
        return layout_copies.filters_to_taps(w)[None]
    w2 = w.reshape(groups, o // groups, cg, kh, kw).transpose(0, 3, 4, 2, 1)
    return xp.ascontiguousarray(w2).reshape(groups, kh * kw * cg, o // groups)


def _matmul_into(xp: Any, a: Any, b: Any, out: Any) -> None:
    """``out[...] = a @ b``; straight into ``out`` when it is one contiguous block (one group)."""
    if out.shape[0] == 1:  # other modules' matmul may not take a strided out=
        xp.matmul(a, b, out=out)
    else:
        out[...] = xp.matmul(a, b)


def conv2d(xp: Any, x: Any, w: Any, stride: Pair, pad: Pair, dilation: Pair, groups: int) -> Any:
    """Cross-correlation of x (N, C, H, W) with w (O, C/G, kh, kw): (N, O, Ho, Wo).

    Example:
        >>> import numpy as np
        >>> x = np.arange(16.0).reshape(1, 1, 4, 4)
        >>> conv2d(np, x, np.ones((1, 1, 2, 2)), (2, 2), (0, 0), (1, 1), 1).tolist()
        [[[[10.0, 18.0], [42.0, 50.0]]]]
    """
    n = x.shape[0]
    o, cg, kh, kw = w.shape
    og, (ho, wo) = o // groups, conv_out_hw(x.shape[2:], (kh, kw), stride, pad, dilation)
    geometry = {"stride": stride, "pad": pad, "dilation": dilation, "groups": groups}
    if _winograd(xp, (x, w), geometry, (kh, kw), (cg, o), (ho, wo, n)):
        return winograd.conv2d(x, w, pad)
    if _host(xp) and channels_first_columns.runs(x, w, groups):  # few input channels: a first layer
        return channels_first_columns.conv2d(x, w, (stride, pad, dilation), (ho, wo))
    if pointwise_conv.runs(xp, (x, w), (kh, kw), pad, groups):
        return pointwise_conv.conv2d(x, w, stride)
    if valid_taps.runs(xp, (x, w), geometry, ((kh, kw), (cg, o), x.shape[2:], (ho, wo))):
        return valid_taps.conv2d(x, w, pad)
    src = _source(xp, x, (kh, kw), pad, groups)
    if groups == 1 and _host(xp) and n * ho * wo <= o and column_copies.available(x, w):
        return _conv2d_rows(src, w, ((kh, kw), stride, dilation, (ho, wo)), n)
    # (G, kh*kw*Cg, Og): the weight in the columns' order, a contiguous copy (small).
    w2 = _taps_first(xp, w, groups)
    y = xp.empty((n, ho, wo, groups, og), dtype=x.dtype)
    step = images_per_chunk(n, ho * wo * kh * kw * cg * groups * x.dtype.itemsize)
    for n0 in range(0, n, step):
        images = slice(n0, n0 + step)
        col = _chunk_columns(xp, src, images, ((kh, kw), stride, dilation, (ho, wo)), groups)
        y_rows = y[n0 : n0 + step].reshape(-1, groups, og).transpose(1, 0, 2)
        _matmul_into(xp, _rows(col, groups), w2, y_rows)
    return _nchw(xp, y.reshape(n, ho, wo, o))


def _conv2d_rows(src: Any, w: Any, geometry: tuple, n: int) -> Any:
    """conv2d on numpy with more filters than output pixels, one group: the weight's (O,
    taps*C) rows @ columns^T into (O, N, Ho, Wo), then NCHW (the taps-first weight's full
    transpose cost more than this GEMM order loses: ``ROWS_FIRST_MIN``)."""
    o, c, kh, kw = w.shape
    ho, wo = geometry[3]
    rows = np.ascontiguousarray(w.reshape(o, c, kh * kw).transpose(0, 2, 1)).reshape(o, -1)
    y = np.empty((o, n * ho * wo), dtype=src.dtype)
    step = images_per_chunk(n, ho * wo * kh * kw * c * src.dtype.itemsize)
    for n0 in range(0, n, step):
        col = _rows(_chunk_columns(np, src, slice(n0, n0 + step), geometry, 1), 1)[0]
        np.matmul(rows, col.T, out=y[:, n0 * ho * wo : (n0 + step) * ho * wo])
    return np.ascontiguousarray(y.reshape(o, n, ho, wo).transpose(1, 0, 2, 3))


def conv2d_grad_weight(
    xp: Any, x: Any, gy: Any, ksize: Pair, stride: Pair, pad: Pair, dilation: Pair, groups: int
) -> Any:
    """Weight gradient of conv2d: x (N, C, H, W), gy (N, O, Ho, Wo) -> (O, C/G, kh, kw).

    Example:
        >>> import numpy as np
        >>> conv2d_grad_weight(np, np.ones((1, 1, 3, 3)), np.ones((1, 2, 2, 2)), (2, 2),
        ...                    (1, 1), (0, 0), (1, 1), 1)[1, 0].tolist()
        [[4.0, 4.0], [4.0, 4.0]]
    """
    n, c = x.shape[:2]
    o, ho, wo = gy.shape[1:]
    (kh, kw), og, cg = ksize, o // groups, c // groups
    geometry = {"stride": stride, "pad": pad, "dilation": dilation, "groups": groups}
    if _winograd(xp, (x, gy), geometry, ksize, (c, o), (ho, wo, n)):
        return winograd.conv2d_grad_weight(x, gy, pad)
    if _host(xp) and channels_first_columns.runs(x, gy, groups):
        return channels_first_columns.conv2d_grad_weight(x, gy, ksize, (stride, pad, dilation))
    if pointwise_conv.runs(xp, (x, gy), ksize, pad, groups):
        return pointwise_conv.conv2d_grad_weight(x, gy, stride)
    src = _source(xp, x, ksize, pad, groups)
    g = _nhwc(xp, gy).reshape(n, ho * wo, groups, og)
    step = images_per_chunk(n, ho * wo * kh * kw * c * x.dtype.itemsize)
    # a large weight, one group, numpy: gy^T @ columns, (O, kh*kw*C) rows that become filters by
    # a reorder within each row; else (G, kh*kw*Cg, Og) (a small weight's transpose is cheap and
    # its GEMM faster in that order). Summed over chunks of images in a fixed order.
    rows_first = groups == 1 and _host(xp) and o * c * kh * kw >= ROWS_FIRST_MIN
    rows_first, gw = rows_first and column_copies.available(x, gy), None
    for n0 in range(0, n, step):
        images = slice(n0, n0 + step)
        col = _chunk_columns(xp, src, images, (ksize, stride, dilation, (ho, wo)), groups)
        col = _rows(col, groups)
        grads = g[n0 : n0 + step].reshape(-1, groups, og).transpose(1, 0, 2)
        if rows_first:
            part = xp.matmul(grads[0].T, col[0])
        else:
            part = xp.matmul(col.transpose(0, 2, 1), grads)
        gw = part if gw is None else xp.add(gw, part, out=gw)
    if rows_first:
        return layout_copies.rows_to_filters(gw, (o, cg, kh, kw))
    gw = gw.reshape(groups, kh, kw, cg, og).transpose(0, 4, 3, 1, 2)
    return xp.ascontiguousarray(gw).reshape(o, cg, kh, kw)


def conv_transpose2d(xp: Any, x: Any, w: Any, geometry: dict, out_hw: Pair) -> Any:
    """Transposed convolution of x (N, Cin, H, W) with w (Cin, Cout/G, kh, kw): conv2d's adjoint.

    ``geometry`` holds stride, pad, dilation and groups; ``out_hw`` is the output's (H, W).

    Example:
        >>> import numpy as np
        >>> g = {"stride": (1, 1), "pad": (0, 0), "dilation": (1, 1), "groups": 1}
        >>> conv_transpose2d(np, np.ones((1, 1, 2, 2)), np.ones((1, 1, 2, 2)), g, (3, 3))[0, 0]
        array([[1., 2., 1.],
               [2., 4., 2.],
               [1., 2., 1.]])
    """
    runs = winograd.runs_transposed(geometry, w.shape, x.shape, out_hw)
    if runs and _host(xp) and column_copies.available(x, w):
        return winograd.conv_transpose2d(x, w, geometry["pad"])
    stride, pad, dilation, groups = (geometry[k] for k in ("stride", "pad", "dilation", "groups"))
    if pointwise_conv.runs(xp, (x, w), w.shape[2:], pad, groups):
        return pointwise_conv.conv_transpose2d(x, w, stride, out_hw)
    # the adjoint of a convolution from out_hw to x's (H, W), Cout -> Cin channels
    shapes = (w.shape[2:], (w.shape[1], w.shape[0]), tuple(out_hw), x.shape[2:])
    if valid_taps.runs(xp, (x, w), geometry, shapes):
        return valid_taps.conv_transpose2d(x, w, pad, out_hw)
    n, cin, h, wd = x.shape
    cog, kh, kw = w.shape[1:]
    cig, (ph, pw), (oh, ow) = cin // groups, pad, out_hw
    xs = _nhwc(xp, x).reshape(n, h * wd, groups, cig)
    # (G, Cin/G, kh*kw*Cout/G): rows of the weight in the columns' order.
    w2 = w.reshape(groups, cig, cog, kh, kw).transpose(0, 1, 3, 4, 2)
    w2 = xp.ascontiguousarray(w2).reshape(groups, cig, kh * kw * cog)
    fast = _host(xp) and column_copies.available(x, w)  # numba's col2im writes the crop only
    shape = (n, oh, ow) if fast else (n, oh + 2 * ph, ow + 2 * pw)
    image = (xp.empty if fast else xp.zeros)((*shape, groups, cog), dtype=x.dtype)
    step = images_per_chunk(n, h * wd * kh * kw * cog * groups * x.dtype.itemsize)
    for n0 in range(0, n, step):
        m = min(step, n - n0)
        col = xp.empty((m, h, wd, groups, kh, kw, cog), dtype=x.dtype)
        xs_rows = xs[n0 : n0 + m].reshape(-1, groups, cig).transpose(1, 0, 2)
        _matmul_into(xp, xs_rows, w2, _rows(col, groups))
        part = image[n0 : n0 + m]
        if fast:
            column_copies.add_columns(col, stride, dilation, pad, (oh, ow), out=part)
            continue
        for i, j, (rows, cols) in offsets((kh, kw), stride, dilation, (h, wd)):
            part[:, rows, cols] += col[:, :, :, :, i, j]
    if not fast:
        image = image[:, ph : ph + oh, pw : pw + ow]
    return _nchw(xp, image.reshape(n, oh, ow, groups * cog))
