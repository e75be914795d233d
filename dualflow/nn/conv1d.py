"""1-D convolution layers ``Conv1d`` and ``ConvTranspose1d`` (NCL, PyTorch's weight layouts).

Composites: the input (N, C, L) becomes (N, C, 1, L) and the weight gets a kernel height of 1, so
the math (and its gradients, to any order) is ``ops.conv2d`` / ``ops.conv_transpose2d``.
Unbatched (C, L) inputs are accepted, as PyTorch.
"""

from __future__ import annotations

from typing import Any

from dualflow import ops
from dualflow.errors import ShapeError
from dualflow.nn.conv import _Conv, check_padding, check_transposed_padding
from dualflow.tensor.core import Tensor


def _as_4d(name: str, x: Any) -> tuple[Any, bool]:
    shape = tuple(x.shape)
    if len(shape) not in (2, 3):
        raise ShapeError(f"{name}: expected a 2-D (C, L) or 3-D (N, C, L) input, got {shape}")
    batched = len(shape) == 3
    x = x if batched else ops.expand_dims(x, 0)
    return ops.expand_dims(x, 2), batched


def _back(y: Any, batched: bool) -> Tensor:
    y = ops.squeeze(y, 2)
    return y if batched else ops.squeeze(y, 0)


class Conv1d(_Conv):
    """1-D convolution (cross-correlation) of x (N, C_in, L) -> (N, C_out, L').

    Arguments as ``Conv2d`` with one spatial axis; the weight is (C_out, C_in/groups, k).

    Example:
        >>> import numpy as np
        >>> conv = Conv1d(2, 4, 3, padding=1)
        >>> conv
        Conv1d(2, 4, kernel_size=(3,), stride=(1,), padding=(1,))
        >>> conv(np.zeros((5, 2, 7), np.float32)).shape
        (5, 4, 7)
    """

    _dims = 1

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int],
        stride: int | tuple[int] = 1,
        padding: int | tuple[int] | str = 0,
        dilation: int | tuple[int] = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        check_padding("Conv1d", padding, stride, padding_mode)
        super().__init__(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding,
            dilation=dilation, groups=groups, bias=bias, padding_mode=padding_mode,
            device=device, dtype=dtype,
        )  # fmt: skip

    def forward(self, x: Any) -> Tensor:
        """Convolve ``x`` (N, C_in, L) (or (C_in, L)) with the weight and add the bias."""
        x, (pad,) = self._pad_input(x)
        x, batched = _as_4d("Conv1d", x)
        w = ops.expand_dims(self.weight, 2)
        y = ops.conv2d(
            x, w, self.bias, (1, self.stride[0]), (0, pad), (1, self.dilation[0]), self.groups
        )
        return _back(y, batched)


class ConvTranspose1d(_Conv):
    """Transposed 1-D convolution with weight (C_in, C_out/groups, k); arguments as
    ``ConvTranspose2d`` with one spatial axis.

    Example:
        >>> import numpy as np
        >>> up = ConvTranspose1d(4, 2, 2, stride=2)
        >>> up, up(np.zeros((1, 4, 3), np.float32)).shape
        (ConvTranspose1d(4, 2, kernel_size=(2,), stride=(2,)), (1, 2, 6))
    """

    _dims = 1

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int],
        stride: int | tuple[int] = 1,
        padding: int | tuple[int] = 0,
        output_padding: int | tuple[int] = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: int | tuple[int] = 1,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        check_transposed_padding("ConvTranspose1d", padding, padding_mode)
        super().__init__(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding,
            dilation=dilation, groups=groups, bias=bias, padding_mode=padding_mode,
            output_padding=output_padding, transposed=True, device=device, dtype=dtype,
        )  # fmt: skip

    def forward(self, x: Any, output_size: Any = None) -> Tensor:
        """Transposed convolution of ``x`` (N, C_in, L); ``output_size`` picks the output
        padding, as PyTorch."""
        (extra,) = self._output_padding(x, output_size)
        x, batched = _as_4d("ConvTranspose1d", x)
        y = ops.conv_transpose2d(
            x, ops.expand_dims(self.weight, 2), self.bias, (1, self.stride[0]),
            (0, self.padding[0]), (0, extra), self.groups, (1, self.dilation[0]),
        )  # fmt: skip
        return _back(y, batched)
