"""Pointwise (1x1) convolutions as batched GEMMs on NCHW arrays: no layout copies, no columns.

A 1x1 convolution without padding in one group is y[n] = W (O, C) @ x[n] (C, pixels) at the
strided pixels: numpy's matmul over the batch writes NCHW directly, where the columns path made
channels-last copies around one GEMM (ResNet-18's stride-2 shortcut 64 -> 128 at 32x32: 1.8 ->
0.8 ms). The input gradient is the same product with W^T, placed at the strided pixels; the
weight gradient is one GEMM over every image's pixels. MobileNetV2 is mostly such layers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.kernels.backend import backend_of
from dualflow.kernels.base.windows import Pair
from dualflow.kernels.conv import column_copies


def _host(xp: Any) -> bool:
    """Whether dualflow's numba CPU kernels take ``xp``'s arrays (Backend's ``host_kernels``)."""
    return backend_of(xp).host_kernels


def takes(ksize: Pair, pad: Pair, groups: int) -> bool:
    """The shape rule (also the scratch facts'): a 1x1 kernel, no padding, one group.

    Example:
        >>> takes((1, 1), (0, 0), 1), takes((1, 1), (1, 1), 1), takes((3, 3), (0, 0), 1)
        (True, False, False)
    """
    return tuple(ksize) == (1, 1) and tuple(pad) == (0, 0) and groups == 1


def runs(xp: Any, arrays: tuple, ksize: Pair, pad: Pair, groups: int) -> bool:
    """Whether a convolution runs here: ``takes``'s shape rule and numpy arrays of one float
    dtype (shapes and dtypes only, so eager and compiled calls agree).

    Example:
        >>> x = np.zeros((2, 8, 4, 4), np.float32)
        >>> runs(np, (x, x), (1, 1), (0, 0), 1), runs(np, (x, x), (3, 3), (1, 1), 1)
        (True, False)
    """
    return takes(ksize, pad, groups) and _host(xp) and column_copies.available(*arrays)


def _pixels(x: Any, stride: Pair) -> Any:
    """x (N, C, H, W) at the strided pixels as a C-ordered (N, C, pixels) array (a view when
    x is C-ordered and the stride is 1)."""
    picked = x if tuple(stride) == (1, 1) else x[:, :, :: stride[0], :: stride[1]]
    return np.ascontiguousarray(picked).reshape(x.shape[0], x.shape[1], -1)


def conv2d(x: Any, w: Any, stride: Pair) -> Any:
    """x (N, C, H, W) with w (O, C, 1, 1), no padding: (N, O, ceil(H/sh), ceil(W/sw)).

    Example:
        >>> x = np.arange(8.0).reshape(1, 2, 2, 2)
        >>> conv2d(x, np.array([1.0, 10.0]).reshape(1, 2, 1, 1), (2, 2)).tolist()
        [[[[40.0]]]]
    """
    n, o = x.shape[0], w.shape[0]
    ho, wo = -(-x.shape[2] // stride[0]), -(-x.shape[3] // stride[1])
    y = np.empty((n, o, ho * wo), x.dtype)
    np.matmul(w.reshape(o, -1), _pixels(x, stride), out=y)
    return y.reshape(n, o, ho, wo)


def conv_transpose2d(x: Any, w: Any, stride: Pair, out_hw: Pair) -> Any:
    """conv2d's input gradient: x (N, Cin, h, w) with w (Cin, Cout, 1, 1) to (N, Cout, *out_hw),
    every pixel off the stride's grid zero.

    Example:
        >>> conv_transpose2d(np.ones((1, 1, 2, 2)), np.full((1, 1, 1, 1), 3.0), (2, 2),
        ...                  (3, 4))[0, 0].tolist()
        [[3.0, 0.0, 3.0, 0.0], [0.0, 0.0, 0.0, 0.0], [3.0, 0.0, 3.0, 0.0]]
    """
    n, cin, h, wd = x.shape
    cout = w.shape[1]
    wt = w.reshape(cin, cout).T  # (Cout, Cin): a transposed view, read as such by BLAS
    rows = np.ascontiguousarray(x).reshape(n, cin, h * wd)
    if tuple(stride) == (1, 1) and tuple(out_hw) == (h, wd):
        y = np.empty((n, cout, h * wd), x.dtype)
        np.matmul(wt, rows, out=y)
        return y.reshape(n, cout, h, wd)
    y = np.zeros((n, cout, *out_hw), x.dtype)
    y[:, :, :: stride[0], :: stride[1]][:, :, :h, :wd] = np.matmul(wt, rows).reshape(n, cout, h, wd)
    return y


def conv2d_grad_weight(x: Any, gy: Any, stride: Pair) -> Any:
    """Weight gradient of ``conv2d``: x (N, C, H, W), gy (N, O, Ho, Wo) -> (O, C, 1, 1), one
    GEMM (O, N*pixels) @ (N*pixels, C).

    Example:
        >>> conv2d_grad_weight(np.ones((2, 1, 2, 2)), np.ones((2, 1, 1, 1)), (2, 2)).tolist()
        [[[[2.0]]]]
    """
    n, c, o = x.shape[0], x.shape[1], gy.shape[1]
    g = np.ascontiguousarray(gy.reshape(n, o, -1).transpose(1, 0, 2)).reshape(o, -1)
    xs = np.ascontiguousarray(_pixels(x, stride).transpose(1, 0, 2)).reshape(c, -1)
    return (g @ xs.T).reshape(o, c, 1, 1)


def conv2d_scratch(x: tuple, w: tuple, item: int, stride: Pair) -> int:
    """Bytes ``conv2d`` holds besides its inputs and result: the strided pixels' copy.

    Example:
        >>> conv2d_scratch((2, 8, 4, 4), (16, 8, 1, 1), 4, (2, 2)), conv2d_scratch(
        ...     (2, 8, 4, 4), (16, 8, 1, 1), 4, (1, 1))
        (256, 0)
    """
    return 0 if tuple(stride) == (1, 1) else _strided_bytes(x, stride, item)


def conv_transpose2d_scratch(x: tuple, w: tuple, item: int, stride: Pair, out_hw: Pair) -> int:
    """Bytes ``conv_transpose2d`` holds besides its inputs and result: the product before it is
    placed on the stride's grid (none when it is the result).

    Example:
        >>> conv_transpose2d_scratch((2, 16, 2, 2), (16, 8, 1, 1), 4, (2, 2), (4, 4))
        256
    """
    if tuple(stride) == (1, 1) and tuple(out_hw) == tuple(x[2:]):
        return 0
    return x[0] * w[1] * x[2] * x[3] * item


def conv2d_grad_weight_scratch(x: tuple, gy: tuple, item: int, stride: Pair) -> int:
    """Bytes ``conv2d_grad_weight`` holds besides its inputs and result: the strided pixels, and
    both operands of the GEMM in channels-first order.

    Example:
        >>> conv2d_grad_weight_scratch((2, 8, 4, 4), (2, 16, 2, 2), 4, (2, 2))
        1024
    """
    strided = 0 if tuple(stride) == (1, 1) else _strided_bytes(x, stride, item)
    return strided + _strided_bytes(x, stride, item) + gy[0] * gy[1] * gy[2] * gy[3] * item


def _strided_bytes(x: tuple, stride: Pair, item: int) -> int:
    return x[0] * x[1] * -(-x[2] // stride[0]) * -(-x[3] // stride[1]) * item
