"""2-D pooling layers: ``MaxPool2d``, ``AvgPool2d`` and ``AdaptiveAvgPool2d`` (NCHW).

Only the variants the ops implement are accepted (floor mode, no dilation for max pooling,
padded zeros counted by average pooling); other options raise NotImplementedError up front.
"""

from __future__ import annotations

from typing import Any

from dualflow import arguments, ops
from dualflow.errors import ShapeError
from dualflow.nn.module import Module
from dualflow.nn.pooling1d import adaptive_matrix, check_pool
from dualflow.tensor.core import Tensor


class MaxPool2d(Module):
    """Max over ``kernel_size`` windows; ``stride`` defaults to ``kernel_size``.

    Example:
        >>> import numpy as np
        >>> pool = MaxPool2d(2)
        >>> pool
        MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
        >>> pool(np.arange(16.0).reshape(1, 1, 4, 4)).tolist()
        [[[[5.0, 7.0], [13.0, 15.0]]]]
    """

    def __init__(
        self,
        kernel_size: int | tuple[int, int],
        stride: int | tuple[int, int] | None = None,
        padding: int | tuple[int, int] = 0,
        dilation: int | tuple[int, int] = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__()
        if dilation not in (1, (1, 1)) or return_indices or ceil_mode:
            raise NotImplementedError(
                "MaxPool2d: dilation != 1, return_indices and ceil_mode are not supported"
            )
        check_pool("MaxPool2d", kernel_size, stride, padding, 2)
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, x: Any) -> Tensor:
        """Pool ``x`` (N, C, H, W)."""
        return ops.max_pool2d(x, self.kernel_size, self.stride, self.padding)

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class AvgPool2d(Module):
    """Mean over ``kernel_size`` windows (padded zeros counted); ``stride`` defaults to
    ``kernel_size``.

    Example:
        >>> import numpy as np
        >>> AvgPool2d(2)(np.arange(16.0).reshape(1, 1, 4, 4)).tolist()
        [[[[2.5, 4.5], [10.5, 12.5]]]]
    """

    def __init__(
        self,
        kernel_size: int | tuple[int, int],
        stride: int | tuple[int, int] | None = None,
        padding: int | tuple[int, int] = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> None:
        super().__init__()
        if ceil_mode or not count_include_pad or divisor_override is not None:
            raise NotImplementedError(
                "AvgPool2d: ceil_mode, count_include_pad=False and divisor_override are not "
                "supported"
            )
        check_pool("AvgPool2d", kernel_size, stride, padding, 2)
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding = padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, x: Any) -> Tensor:
        """Pool ``x`` (N, C, H, W)."""
        return ops.avg_pool2d(x, self.kernel_size, self.stride, self.padding)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    """Average pooling to a fixed output size (N, C, oh, ow).

    Windows as PyTorch's (``floor(i*H/oh)`` to ``ceil((i+1)*H/oh)``); ``(1, 1)`` is global
    average pooling, giving (N, C, 1, 1) as PyTorch; ``None`` keeps that input size.

    Example:
        >>> import numpy as np
        >>> AdaptiveAvgPool2d((1, 1))(np.arange(8.0).reshape(1, 2, 2, 2)).tolist()
        [[[[1.5]], [[5.5]]]]
    """

    def __init__(self, output_size: int | tuple[int | None, int | None]) -> None:
        super().__init__()
        sizes = output_size if isinstance(output_size, tuple | list) else (output_size,) * 2
        if len(sizes) != 2:
            raise arguments.fail("AdaptiveAvgPool2d", "output_size", output_size, "needs 2 sizes")
        for size in sizes:  # None keeps that input size
            if size is not None:
                arguments.integer("AdaptiveAvgPool2d", "output_size", size)
        self.output_size = output_size

    def forward(self, x: Any) -> Tensor:
        """Pool ``x`` (N, C, H, W) to (N, C, oh, ow)."""
        n, c, h, w = _shape4(x)
        sizes = self.output_size
        oh, ow = (sizes, sizes) if isinstance(sizes, int) else sizes
        oh, ow = h if oh is None else oh, w if ow is None else ow
        if (oh, ow) == (1, 1):
            return ops.reshape(ops.global_avg_pool2d(x), (n, c, 1, 1))
        if oh <= 0 or ow <= 0:
            raise ValueError(f"AdaptiveAvgPool2d: output size {(oh, ow)} must be positive")
        if h % oh == 0 and w % ow == 0:
            return ops.avg_pool2d(x, (h // oh, w // ow))
        rows, cols = adaptive_matrix(h, oh, x), adaptive_matrix(w, ow, x)
        return ops.matmul(ops.matmul(rows, x), ops.transpose(cols))  # PyTorch's windows

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


def _shape4(x: Any) -> tuple[int, int, int, int]:
    shape = tuple(x.shape)
    if len(shape) != 4:
        raise ShapeError(f"AdaptiveAvgPool2d: input must be (N, C, H, W), got shape {shape}")
    return shape  # type: ignore[return-value]
