"""2-D convolution layers ``Conv2d``, ``ConvTranspose2d`` (NCHW, PyTorch's weight layouts).

Both hold the weight and bias, PyTorch's default init, and the geometry attributes PyTorch has
(``kernel_size``, ``stride``, ``padding``, ``dilation``, ``groups``...); the math is ``ops.conv2d``
and ``ops.conv_transpose2d``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow import arguments, ops
from dualflow.nn import init
from dualflow.nn.module import Module
from dualflow.tensor.core import Tensor

# padding_mode -> ops.pad mode ("circular" is a gather, see _circular).
_PAD_MODES = {"zeros": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def ntuple(value: Any, n: int, name: str, owner: str = "layer") -> tuple[int, ...]:
    """``value`` (an int or n ints) as an n-tuple of ints; ValueError naming ``name`` otherwise.

    Example:
        >>> ntuple(3, 2, "kernel_size"), ntuple((1, 2), 2, "stride")
        ((3, 3), (1, 2))
    """
    return arguments.integers(owner, name, value, n, minimum=None)


def _output_padding(name: str, value: Any, conv: Any) -> tuple[int, ...]:
    """A transposed convolution's output padding: each in [0, max(stride, dilation)) as
    PyTorch requires (a larger one would add rows no input reaches)."""
    padding = ntuple(value, len(conv.stride), "output_padding", name)
    for p, s, d in zip(padding, conv.stride, conv.dilation):
        if not 0 <= p < max(s, d):
            raise arguments.fail(
                name, "output_padding", value, "must be >= 0 and smaller than stride or dilation"
            )
    return padding


def check_geometry(name: str, kernel: tuple, stride: tuple, padding: Any, dilation: tuple) -> None:
    """ArgumentError naming the first convolution/pooling size that is out of range."""
    for key, values, low in (("kernel_size", kernel, 1), ("stride", stride, 1)):
        if min(values) < low:
            raise arguments.fail(name, key, values, "must be positive")
    if not isinstance(padding, str) and min(padding) < 0:
        raise arguments.fail(name, "padding", padding, "must be non-negative")
    if min(dilation) < 1:
        raise arguments.fail(name, "dilation", dilation, "must be positive")


def check_padding(name: str, padding: Any, stride: Any, padding_mode: str) -> None:
    """ArgumentError for a padding string, mode or 'same'-with-stride PyTorch rejects."""
    if isinstance(padding, str) and padding not in ("valid", "same"):
        raise arguments.fail(name, "padding", padding, "must be 'valid', 'same' or sizes")
    strides = (stride,) if isinstance(stride, int) else tuple(stride)
    if padding == "same" and any(s != 1 for s in strides):
        raise arguments.fail(
            name, "padding", padding, "'same' is not supported for strided convolutions"
        )
    arguments.choice(name, "padding_mode", padding_mode, tuple(_PAD_MODES))


def check_transposed_padding(name: str, padding: Any, padding_mode: str) -> None:
    """ArgumentError for what PyTorch's transposed convolutions reject."""
    arguments.choice(name, "padding_mode", padding_mode, ("zeros",))
    if isinstance(padding, str):
        raise arguments.fail(name, "padding", padding, "must be an int or a tuple of ints")


def _circular(x: Any, pairs: tuple) -> Any:
    """Wrap-around padding of the trailing ``len(pairs)`` axes (PyTorch's 'circular')."""
    lead = len(x.shape) - len(pairs)
    for k, (before, after) in enumerate(pairs):
        n = x.shape[lead + k]
        rows = np.arange(-before, n + after) % n
        x = ops.getitem(x, (slice(None),) * (lead + k) + (rows,))
    return x


class _Conv(Module):
    """Shared constructor of the convolutions: validation, attributes, parameters.

    ``_dims`` is the number of spatial axes (1 or 2); the weight is PyTorch's layout.
    """

    _dims = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, **geom: Any) -> None:
        super().__init__()
        n, name = self._dims, type(self).__name__
        in_channels = arguments.integer(name, "in_channels", in_channels)
        out_channels = arguments.integer(name, "out_channels", out_channels)
        groups = arguments.integer(name, "groups", geom["groups"])
        for key, channels in (("in_channels", in_channels), ("out_channels", out_channels)):
            if channels % groups:
                raise arguments.fail(name, key, channels, f"must be divisible by groups={groups}")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = ntuple(kernel_size, n, "kernel_size", name)
        self.stride = ntuple(geom["stride"], n, "stride", name)
        self.dilation = ntuple(geom["dilation"], n, "dilation", name)
        padding = geom["padding"]
        self.padding = padding if isinstance(padding, str) else ntuple(padding, n, "padding", name)
        check_geometry(name, self.kernel_size, self.stride, self.padding, self.dilation)
        self.output_padding = _output_padding(name, geom.get("output_padding", 0), self)
        self.groups, self.padding_mode = groups, geom["padding_mode"]
        self.transposed = bool(geom.get("transposed", False))
        dtype, device = geom["dtype"], geom["device"]
        if self.transposed:  # PyTorch: (in, out / groups, *kernel)
            w_shape = (self.in_channels, self.out_channels // groups) + self.kernel_size
        else:  # (out, in / groups, *kernel)
            w_shape = (self.out_channels, self.in_channels // groups) + self.kernel_size
        self.weight = init.empty_parameter(w_shape, dtype, device)
        if geom["bias"]:
            self.bias = init.empty_parameter((out_channels,), dtype, device)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def _pad_pairs(self) -> tuple[tuple[int, int], ...]:
        if self.padding == "valid":
            return ((0, 0),) * self._dims
        if self.padding == "same":
            totals = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
            return tuple((t // 2, t - t // 2) for t in totals)
        return tuple((p, p) for p in self.padding)

    def _pad_input(self, x: Any) -> tuple[Any, tuple[int, ...]]:
        """``x`` padded explicitly where the conv op cannot (asymmetric 'same', other modes),
        and the symmetric padding left for the op."""
        pairs = self._pad_pairs()
        if self.padding_mode == "zeros" and all(a == b for a, b in pairs):
            return x, tuple(a for a, _ in pairs)
        if self.padding_mode == "circular":
            return _circular(x, pairs), (0,) * self._dims
        lead = ((0, 0),) * (len(x.shape) - self._dims)
        return ops.pad(x, lead + pairs, mode=_PAD_MODES[self.padding_mode]), (0,) * self._dims

    def _output_padding(self, x: Any, output_size: Any) -> tuple[int, ...]:
        if output_size is None:
            return self.output_padding
        n = self._dims
        size = tuple(int(s) for s in output_size)[-n:]
        extra = []
        for k in range(n):
            smallest = (
                (x.shape[len(x.shape) - n + k] - 1) * self.stride[k]
                - 2 * self.padding[k]
                + self.dilation[k] * (self.kernel_size[k] - 1)
                + 1
            )
            if not smallest <= size[k] < smallest + self.stride[k]:
                raise ValueError(
                    f"requested an output size of {size}, but valid sizes range from {smallest} "
                    f"to {smallest + self.stride[k] - 1} on spatial axis {k} (input {x.shape})"
                )
            extra.append(size[k] - smallest)
        return tuple(extra)

    def reset_parameters(self) -> None:
        """PyTorch's default: kaiming_uniform(a=√5) weight, U(±1/√fan_in) bias; fan_in from the
        weight's dims 1.. (so for ConvTranspose2d it is ``out/groups * kh * kw``, as PyTorch)."""
        init.linear_default_(self.weight, self.bias)

    def extra_repr(self) -> str:
        s = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}"
        )
        zeros, ones = (0,) * self._dims, (1,) * self._dims
        if self.padding != zeros:
            s += f", padding={self.padding}"
        if self.dilation != ones:
            s += f", dilation={self.dilation}"
        if self.output_padding != zeros:
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
    ``"reflect"``, ``"replicate"`` or ``"circular"``.

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
        check_padding("Conv2d", padding, stride, padding_mode)
        super().__init__(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding,
            dilation=dilation, groups=groups, bias=bias, padding_mode=padding_mode,
            device=device, dtype=dtype,
        )  # fmt: skip

    def forward(self, x: Any) -> Tensor:
        """Convolve ``x`` (N, C_in, H, W) with the weight and add the bias."""
        x, pad = self._pad_input(x)
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
        check_transposed_padding(type(self).__name__, padding, padding_mode)
        super().__init__(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding,
            dilation=dilation, groups=groups, bias=bias, padding_mode=padding_mode,
            output_padding=output_padding, transposed=True, device=device, dtype=dtype,
        )  # fmt: skip

    def forward(self, x: Any, output_size: Any = None) -> Tensor:
        """Transposed convolution of ``x`` (N, C_in, H, W); ``output_size`` (…, H_out, W_out)
        picks the output padding, as PyTorch."""
        return ops.conv_transpose2d(
            x, self.weight, self.bias, self.stride, self.padding,
            self._output_padding(x, output_size), self.groups, self.dilation,
        )  # fmt: skip
