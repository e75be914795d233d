"""1-D pooling layers ``MaxPool1d``, ``AvgPool1d`` and ``AdaptiveAvgPool1d`` (NCL), and the
averaging matrices that make adaptive average pooling exact for any output size.

The fixed-window layers reshape (N, C, L) to (N, C, 1, L) and call the 2-D pooling ops; adaptive
pooling is a matmul with PyTorch's windows (``floor(i*L/o)`` to ``ceil((i+1)*L/o)``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dualflow import arguments, ops
from dualflow.errors import ShapeError
from dualflow.nn.conv import check_geometry, ntuple
from dualflow.nn.module import Module
from dualflow.tensor.core import Tensor


def adaptive_matrix(size: int, out: int, like: Any) -> Any:
    """(out, size) matrix averaging PyTorch's adaptive windows, on ``like``'s device and dtype.

    Example:
        >>> adaptive_matrix(3, 2, np.zeros(1)).tolist()
        [[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]]
    """
    matrix = np.zeros((out, size))
    for i in range(out):
        start, end = (i * size) // out, -(-((i + 1) * size) // out)
        matrix[i, start:end] = 1.0 / (end - start)
    device = like.device if isinstance(like, Tensor) else None
    array = matrix.astype(like.dtype)
    return array if device is None else device.xp.asarray(array)


def check_pool(name: str, kernel: Any, stride: Any, padding: Any, n: int) -> tuple:
    """(kernel, stride, padding) as n-tuples, checked as PyTorch checks them."""
    kernel = ntuple(kernel, n, "kernel_size", name)
    stride = kernel if stride is None else ntuple(stride, n, "stride", name)
    padding = ntuple(padding, n, "padding", name)
    check_geometry(name, kernel, stride, padding, (1,) * n)
    if any(2 * p > k for p, k in zip(padding, kernel)):
        raise arguments.fail(name, "padding", padding, "should be at most half of kernel_size")
    return kernel, stride, padding


def _as_4d(name: str, x: Any) -> tuple[Any, bool]:
    shape = tuple(x.shape)
    if len(shape) not in (2, 3):
        raise ShapeError(f"{name}: expected a 2-D (C, L) or 3-D (N, C, L) input, got {shape}")
    batched = len(shape) == 3
    return ops.expand_dims(x if batched else ops.expand_dims(x, 0), 2), batched


def _back(y: Any, batched: bool) -> Tensor:
    y = ops.squeeze(y, 2)
    return y if batched else ops.squeeze(y, 0)


class MaxPool1d(Module):
    """Max over ``kernel_size`` windows of x (N, C, L); ``stride`` defaults to ``kernel_size``.

    Example:
        >>> MaxPool1d(2)
        MaxPool1d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
        >>> MaxPool1d(2)(np.arange(6.0).reshape(1, 1, 6)).tolist()
        [[[1.0, 3.0, 5.0]]]
    """

    def __init__(
        self,
        kernel_size: int,
        stride: int | None = None,
        padding: int = 0,
        dilation: int = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__()
        if dilation not in (1, (1,)) or return_indices or ceil_mode:
            raise NotImplementedError(
                "MaxPool1d: dilation != 1, return_indices and ceil_mode are not supported"
            )
        self._geometry = check_pool("MaxPool1d", kernel_size, stride, padding, 1)
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, x: Any) -> Tensor:
        """Pool ``x`` (N, C, L) or (C, L)."""
        (k,), (s,), (p,) = self._geometry
        x, batched = _as_4d("MaxPool1d", x)
        return _back(ops.max_pool2d(x, (1, k), (1, s), (0, p)), batched)

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class AvgPool1d(Module):
    """Mean over ``kernel_size`` windows of x (N, C, L) (padded zeros counted).

    Example:
        >>> AvgPool1d(2)
        AvgPool1d(kernel_size=(2,), stride=(2,), padding=(0,))
        >>> AvgPool1d(2)(np.arange(4.0).reshape(1, 1, 4)).tolist()
        [[[0.5, 2.5]]]
    """

    def __init__(
        self,
        kernel_size: int,
        stride: int | None = None,
        padding: int = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
    ) -> None:
        super().__init__()
        if ceil_mode or not count_include_pad:
            raise NotImplementedError(
                "AvgPool1d: ceil_mode and count_include_pad=False are not supported"
            )
        geometry = check_pool("AvgPool1d", kernel_size, stride, padding, 1)
        self.kernel_size, self.stride, self.padding = geometry  # PyTorch keeps 1-tuples here
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, x: Any) -> Tensor:
        """Pool ``x`` (N, C, L) or (C, L)."""
        x, batched = _as_4d("AvgPool1d", x)
        pooled = ops.avg_pool2d(
            x, (1, self.kernel_size[0]), (1, self.stride[0]), (0, self.padding[0])
        )
        return _back(pooled, batched)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool1d(Module):
    """Average pooling of x (N, C, L) to (N, C, output_size), with PyTorch's windows.

    Example:
        >>> AdaptiveAvgPool1d(2)(np.arange(3.0).reshape(1, 1, 3)).tolist()
        [[[0.5, 1.5]]]
    """

    def __init__(self, output_size: int) -> None:
        super().__init__()
        if isinstance(output_size, bool) or int(output_size) <= 0:
            raise ValueError(f"AdaptiveAvgPool1d: output_size must be positive, got {output_size}")
        self.output_size = output_size

    def forward(self, x: Any) -> Tensor:
        """Pool the last axis of ``x`` (N, C, L) or (C, L)."""
        if len(x.shape) not in (2, 3):
            raise ShapeError(f"AdaptiveAvgPool1d: expected a 2-D or 3-D input, got {x.shape}")
        size = int(math.prod(x.shape[-1:]))
        pool = adaptive_matrix(size, int(self.output_size), x)
        return ops.matmul(x, ops.transpose(pool))

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"
