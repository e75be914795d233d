"""2-D convolution layers: ``Conv2d`` and ``ConvTranspose2d`` (NCHW, PyTorch's weight layouts).

Both hold the weight and bias, PyTorch's default init, and the geometry attributes PyTorch has
(``kernel_size``, ``stride``, ``padding``, ``dilation``, ``groups``...); the math is ``ops.conv2d``
and ``ops.conv_transpose2d``.
"""

from __future__ import annotations

from typing import Any

from dualflow import ops
from dualflow.nn import init
from dualflow.nn.module import Module
from dualflow.tensor import Tensor

# padding_mode -> ops.pad mode; "circular" has no pad mode yet.
_PAD_MODES = {"zeros": "constant", "reflect": "reflect", "replicate": "edge"}


def _pair(value: Any) -> tuple[int, int]:
    items = (value, value) if isinstance(value, int) else tuple(value)
    if len(items) != 2:
        raise ValueError(f"expected an int or a pair of ints, got {value!r}")
    return int(items[0]), int(items[1])


class _Conv(Module):
    """Shared constructor of the 2-D convolutions: validation, attributes, parameters."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, **geom: Any) -> None:
        super().__init__()
        groups = int(geom["groups"])
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = _pair(kernel_size)
        self.stride, self.dilation = _pair(geom["stride"]), _pair(geom["dilation"])
        padding = geom["padding"]
        self.padding = padding if isinstance(padding, str) else _pair(padding)
        self.output_padding = _pair(geom.get("output_padding", 0))
        self.groups, self.padding_mode = groups, geom["padding_mode"]
        self.transposed = bool(geom.get("transposed", False))
        dtype, device = geom["dtype"], geom["device"]
        if self.transposed:  # PyTorch: (in, out / groups, kh, kw)
            w_shape = (self.in_channels, self.out_channels // groups) + self.kernel_size
        else:  # (out, in / groups, kh, kw)
            w_shape = (self.out_channels, self.in_channels // groups) + self.kernel_size
        self.weight = init.empty_parameter(w_shape, dtype, device)
        self.bias = init.empty_parameter((out_channels,), dtype, device) if geom["bias"] else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's default: kaiming_uniform(a=√5) weight, U(±1/√fan_in) bias; fan_in from the
        weight's dims 1.. (so for ConvTranspose2d it is ``out/groups * kh * kw``, as PyTorch)."""
        init.linear_default_(self.weight, self.bias)

    def extra_repr(self) -> str:
        s = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}"
        )
        if self.padding != (0, 0):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.output_padding != (0, 0):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv2d(_Conv):
    """2-D convolution (cross-correlation) of x (N, C_in, H, W) -> (N, C_out, H', W').

    ``padding`` is an int, a pair, ``"valid"`` (none) or ``"same"`` (stride 1 only; an odd total
    puts the extra row/column at the bottom/right, as PyTorch). ``padding_mode`` is ``"zeros"``,
    ``"reflect"`` or ``"replicate"``.

    Example:
        >>> import numpy as np
        >>> conv = Conv2d(3, 8, 3, padding=1)
        >>> conv
        Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
        >>> conv(np.zeros((2, 3, 5, 5), np.float32)).shape
        (2, 8, 5, 5)
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, int],
        stride: int | tuple[int, int] = 1,
        padding: int | tuple[int, int] | str = 0,
        dilation: int | tuple[int, int] = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        if isinstance(padding, str) and padding not in ("valid", "same"):
            raise ValueError(f"Invalid padding string {padding!r}, should be one of valid, same")
        if padding == "same" and _pair(stride) != (1, 1):
            raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode not in _PAD_MODES:
            raise ValueError(
                f"padding_mode must be one of {sorted(_PAD_MODES)} (circular is not supported), "
                f"got {padding_mode!r}"
            )
        super().__init__(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding,
            dilation=dilation, groups=groups, bias=bias, padding_mode=padding_mode,
            device=device, dtype=dtype,
        )  # fmt: skip

    def _pad_pairs(self) -> tuple[tuple[int, int], tuple[int, int]]:
        if self.padding == "valid":
            return (0, 0), (0, 0)
        if self.padding == "same":
            totals = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
            return tuple((t // 2, t - t // 2) for t in totals)  # type: ignore[return-value]
        return tuple((p, p) for p in self.padding)  # type: ignore[return-value]

    def forward(self, x: Any) -> Tensor:
        """Convolve ``x`` (N, C_in, H, W) with the weight and add the bias."""
        pairs = self._pad_pairs()
        symmetric = all(a == b for a, b in pairs)
        if self.padding_mode == "zeros" and symmetric:
            pad = (pairs[0][0], pairs[1][0])
        else:  # pad explicitly: asymmetric "same" or a non-zero padding mode
            x = ops.pad(x, ((0, 0), (0, 0)) + pairs, mode=_PAD_MODES[self.padding_mode])
            pad = (0, 0)
        return ops.conv2d(x, self.weight, self.bias, self.stride, pad, self.dilation, self.groups)


class ConvTranspose2d(_Conv):
    """Transposed 2-D convolution (the input-gradient of Conv2d) with weight (C_in, C_out/g, kh,
    kw). Output size: ``(H - 1)*stride - 2*padding + dilation*(kh - 1) + output_padding + 1``.

    Example:
        >>> import numpy as np
        >>> up = ConvTranspose2d(4, 2, 2, stride=2)
        >>> up
        ConvTranspose2d(4, 2, kernel_size=(2, 2), stride=(2, 2))
        >>> up(np.zeros((1, 4, 3, 3), np.float32)).shape
        (1, 2, 6, 6)
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, int],
        stride: int | tuple[int, int] = 1,
        padding: int | tuple[int, int] = 0,
        output_padding: int | tuple[int, int] = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: int | tuple[int, int] = 1,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        if padding_mode != "zeros":
            raise ValueError('Only "zeros" padding mode is supported for ConvTranspose2d')
        if isinstance(padding, str):
            raise ValueError("ConvTranspose2d: padding must be an int or a pair of ints")
        super().__init__(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding,
            dilation=dilation, groups=groups, bias=bias, padding_mode=padding_mode,
            output_padding=output_padding, transposed=True, device=device, dtype=dtype,
        )  # fmt: skip

    def _output_padding(self, x: Any, output_size: Any) -> tuple[int, int]:
        if output_size is None:
            return self.output_padding
        size = tuple(int(s) for s in output_size)[-2:]
        extra = []
        for k in range(2):
            smallest = (
                (x.shape[2 + k] - 1) * self.stride[k]
                - 2 * self.padding[k]
                + self.dilation[k] * (self.kernel_size[k] - 1)
                + 1
            )
            if not smallest <= size[k] < smallest + self.stride[k]:
                raise ValueError(
                    f"requested an output size of {size}, but valid sizes range from {smallest} "
                    f"to {smallest + self.stride[k] - 1} on axis {2 + k} (input {x.shape})"
                )
            extra.append(size[k] - smallest)
        return extra[0], extra[1]

    def forward(self, x: Any, output_size: Any = None) -> Tensor:
        """Transposed convolution of ``x`` (N, C_in, H, W); ``output_size`` (…, H_out, W_out)
        picks the output padding, as PyTorch."""
        return ops.conv_transpose2d(
            x, self.weight, self.bias, self.stride, self.padding,
            self._output_padding(x, output_size), self.groups, self.dilation,
        )  # fmt: skip
