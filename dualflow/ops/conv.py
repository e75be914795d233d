"""2-D convolution ops (NCHW, OIHW weights): conv2d, conv_transpose2d and conv2d_grad_weight.

All three are channels-last im2col/col2im around one GEMM per chunk of images
(``kernels.conv.conv_gemm``), or cuDNN on cupy arrays when it runs the case
(``kernels.cuda.cudnn``). They
close under differentiation: conv2d's input gradient is conv_transpose2d and vice versa, and the
weight gradient of both is ``conv2d_grad_weight``, whose own backward is again conv2d and
conv_transpose2d.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.errors import LazyText, ShapeError
from dualflow.kernels.backend import backend_of
from dualflow.kernels.base.windows import Pair, out_size
from dualflow.kernels.conv import conv_gemm, conv_scratch
from dualflow.ops.autocast import lower_inputs
from dualflow.ops.dispatch import apply
from dualflow.ops.geometry import check_4d, check_geometry, pair
from dualflow.ops.registry import Meta, primitive
from dualflow.ops.shape import reshape
from dualflow.ops.validate import require_same_float


def _check_groups(op: str, groups: int, channels: tuple[int, int], shapes: Any) -> None:
    if groups < 1 or channels[0] % groups or channels[1] % groups:
        raise ShapeError(
            f"{op}: groups={groups} must be ≥ 1 and divide both the input ({channels[0]}) and "
            f"output ({channels[1]}) channel counts; got {shapes}"
        )


def _spatial_out(op: str, hw: tuple, ksize: Pair, attrs: dict, shapes: Any) -> Pair:
    s, p, d = attrs["stride"], attrs["pad"], attrs["dilation"]
    check_geometry(op, s, p, d)
    out = tuple(out_size(hw[k], ksize[k], s[k], p[k], d[k]) for k in range(2))
    if min(out) < 1:
        raise ShapeError(
            f"{op}: output size {out} is not positive for {shapes} with stride={s}, pad={p}, "
            f"dilation={d}; use a smaller kernel or dilation, or more padding"
        )
    return out


def _transpose_padding(in_hw: tuple, out_hw: tuple, ksize: Pair, attrs: dict) -> Pair:
    """The output_padding that makes conv_transpose2d give back the input size of a conv2d."""
    s, p, d = attrs["stride"], attrs["pad"], attrs["dilation"]
    return tuple(
        in_hw[k] + 2 * p[k] - d[k] * (ksize[k] - 1) - 1 - s[k] * (out_hw[k] - 1) for k in range(2)
    )


def _geometry(attrs: dict) -> dict:
    return {k: attrs[k] for k in ("stride", "pad", "dilation", "groups")}


def _scratch(kernel_scratch: Any) -> Any:
    """The op's scratch fact from its GEMM kernel's (cuDNN on cupy: the plan counts CPU only)."""

    def scratch(metas: tuple, attrs: dict) -> int:
        (xs, xd), (ws, wd) = metas
        return kernel_scratch(tuple(xs), tuple(ws), np.result_type(xd, wd).itemsize, attrs)

    return scratch


def _conv2d_flops(metas: tuple, attrs: dict) -> int:
    (x, _), (w, _) = metas
    geometry = (attrs[k] for k in ("stride", "pad", "dilation"))
    ho, wo = conv_gemm.conv_out_hw(tuple(x[2:]), tuple(w[2:]), *geometry)
    return 2 * x[0] * ho * wo * w[0] * w[1] * w[2] * w[3]  # N Ho Wo O (C/G kh kw) MACs


def _conv_transpose2d_flops(metas: tuple, attrs: dict) -> int:
    (x, _), (w, _) = metas
    return 2 * x[0] * x[2] * x[3] * w[0] * w[1] * w[2] * w[3]  # N H W Cin (Cout/G kh kw)


def _conv2d_grad_weight_flops(metas: tuple, attrs: dict) -> int:
    (x, _), (gy, _) = metas
    kh, kw = attrs["ksize"]
    return 2 * gy[0] * gy[1] * gy[2] * gy[3] * x[1] // attrs["groups"] * kh * kw


@primitive(
    "conv2d",
    saves=("x0", "x1"),
    aliasing="fresh",  # every kernel (GEMM routes, Winograd, cuDNN) returns new memory
    autocast="lower",
    scratch=_scratch(conv_scratch.conv2d_scratch),
    flops=_conv2d_flops,
)
class Conv2d:
    """Cross-correlation of x (N, C, H, W) with w (O, C/groups, kh, kw), no bias."""

    def infer(x: Meta, w: Meta, **attrs: Any) -> tuple[Meta]:
        check_4d("conv2d", "x", x)
        check_4d("conv2d", "w", w)
        shapes = LazyText(lambda: f"x {tuple(x.shape)}, w {tuple(w.shape)}")
        groups = attrs["groups"]
        _check_groups("conv2d", groups, (x.shape[1], w.shape[0]), shapes)
        if w.shape[1] * groups != x.shape[1]:
            raise ShapeError(
                f"conv2d: x has {x.shape[1]} channels but w expects in_channels/groups * groups "
                f"= {w.shape[1]} * {groups} = {w.shape[1] * groups}; got {shapes}"
            )
        ho, wo = _spatial_out("conv2d", x.shape[2:], w.shape[2:], attrs, shapes)
        return (Meta((x.shape[0], w.shape[0], ho, wo), np.result_type(x.dtype, w.dtype)),)

    def forward(xp, x, w, *, stride, pad, dilation, groups):
        library = backend_of(xp).library  # cuDNN on cupy
        if library is not None and library.conv_usable(x, w):
            y = library.conv2d(x, w, stride, pad, dilation, groups)
            if y is not None:  # else cuDNN refused the case: the GEMM kernels below
                return y
        return conv_gemm.conv2d(xp, x, w, stride, pad, dilation, groups)

    def backward(ctx, gy):
        x, w = ctx.x0, ctx.x1
        ksize, geometry = ctx.in_shapes[1][2:], _geometry(ctx.attrs)
        gx = gw = None
        if ctx.needs_input_grad[0]:
            padding = _transpose_padding(ctx.in_shapes[0][2:], gy.shape[2:], ksize, ctx.attrs)
            gx = apply(ConvTranspose2d, gy, w, output_padding=padding, **geometry)
        if ctx.needs_input_grad[1]:
            gw = apply(Conv2dGradWeight, x, gy, ksize=ksize, **geometry)
        return gx, gw


@primitive(
    "conv_transpose2d",
    saves=("x0", "x1"),
    aliasing="fresh",  # every kernel (GEMM routes, Winograd, cuDNN) returns new memory
    autocast="lower",
    scratch=_scratch(conv_scratch.conv_transpose2d_scratch),
    flops=_conv_transpose2d_flops,
)
class ConvTranspose2d:
    """Transposed convolution of x (N, Cin, H, W) with w (Cin, Cout/groups, kh, kw), no bias."""

    def infer(x: Meta, w: Meta, **attrs: Any) -> tuple[Meta]:
        check_4d("conv_transpose2d", "x", x)
        check_4d("conv_transpose2d", "w", w)
        shapes = LazyText(lambda: f"x {tuple(x.shape)}, w {tuple(w.shape)}")
        groups = attrs["groups"]
        cout = w.shape[1] * groups
        _check_groups("conv_transpose2d", groups, (x.shape[1], cout), shapes)
        if w.shape[0] != x.shape[1]:
            raise ShapeError(
                f"conv_transpose2d: x has {x.shape[1]} channels but w (in_channels, "
                f"out_channels/groups, kh, kw) has {w.shape[0]} in_channels; got {shapes}"
            )
        s, p, d, op = (attrs[k] for k in ("stride", "pad", "dilation", "output_padding"))
        check_geometry("conv_transpose2d", s, p, d)
        if min(op) < 0 or op[0] >= s[0] or op[1] >= s[1]:
            raise ShapeError(
                f"conv_transpose2d: output_padding {op} must be ≥ 0 and smaller than stride {s}"
            )
        out = tuple(
            (x.shape[2 + k] - 1) * s[k] - 2 * p[k] + d[k] * (w.shape[2 + k] - 1) + op[k] + 1
            for k in range(2)
        )
        if min(out) < 1:
            raise ShapeError(
                f"conv_transpose2d: output size {out} is not positive for {shapes} with "
                f"stride={s}, pad={p}; use less padding"
            )
        return (Meta((x.shape[0], cout) + out, np.result_type(x.dtype, w.dtype)),)

    def forward(xp, x, w, *, stride, pad, dilation, groups, output_padding):
        out = tuple(
            (x.shape[2 + k] - 1) * stride[k]
            - 2 * pad[k]
            + dilation[k] * (w.shape[2 + k] - 1)
            + output_padding[k]
            + 1
            for k in range(2)
        )
        geometry = {"stride": stride, "pad": pad, "dilation": dilation, "groups": groups}
        library = backend_of(xp).library  # cuDNN on cupy
        if library is not None and library.conv_usable(x, w):  # conv2d's data gradient
            y = library.conv_transpose2d(x, w, geometry, out)
            if y is not None:
                return y
        return conv_gemm.conv_transpose2d(xp, x, w, geometry, out)

    def backward(ctx, gy):
        x, w = ctx.x0, ctx.x1
        geometry = _geometry(ctx.attrs)
        gx = gw = None
        if ctx.needs_input_grad[0]:
            gx = apply(Conv2d, gy, w, **geometry)
        if ctx.needs_input_grad[1]:
            gw = apply(Conv2dGradWeight, gy, x, ksize=ctx.in_shapes[1][2:], **geometry)
        return gx, gw


@primitive(
    "conv2d_grad_weight",
    saves=("x0", "x1"),
    aliasing="fresh",  # every kernel (GEMM routes, Winograd, cuDNN) returns new memory
    scratch=_scratch(conv_scratch.conv2d_grad_weight_scratch),
    flops=_conv2d_grad_weight_flops,
)
class Conv2dGradWeight:
    """Weight gradient of conv2d: correlate x (N, C, H, W) with gy (N, O, Ho, Wo)."""

    def infer(x: Meta, gy: Meta, **attrs: Any) -> tuple[Meta]:
        op = "conv2d_grad_weight"
        check_4d(op, "x", x)
        check_4d(op, "gy", gy)
        shapes = LazyText(
            lambda: f"x {tuple(x.shape)}, gy {tuple(gy.shape)}, ksize {attrs['ksize']}"
        )
        groups = attrs["groups"]
        _check_groups(op, groups, (x.shape[1], gy.shape[1]), shapes)
        out = _spatial_out(op, x.shape[2:], attrs["ksize"], attrs, shapes)
        if gy.shape[0] != x.shape[0] or tuple(gy.shape[2:]) != out:
            raise ShapeError(
                f"{op}: gy must have shape (N, O, Ho, Wo) = ({x.shape[0]}, O, {out[0]}, "
                f"{out[1]}) to match conv2d's output; got {shapes}"
            )
        shape = (gy.shape[1], x.shape[1] // groups) + tuple(attrs["ksize"])
        return (Meta(shape, np.result_type(x.dtype, gy.dtype)),)

    def forward(xp, x, gy, *, ksize, stride, pad, dilation, groups):
        library = backend_of(xp).library  # cuDNN on cupy
        if library is not None and library.conv_usable(x, gy):
            attrs = {"ksize": ksize, "stride": stride, "pad": pad, "dilation": dilation}
            gw = library.conv2d_grad_weight(x, gy, {**attrs, "groups": groups})
            if gw is not None:
                return gw
        return conv_gemm.conv2d_grad_weight(xp, x, gy, ksize, stride, pad, dilation, groups)

    def backward(ctx, ggw):
        x, gy = ctx.x0, ctx.x1
        ksize, geometry = tuple(ctx.attrs["ksize"]), _geometry(ctx.attrs)
        gx = ggy = None
        if ctx.needs_input_grad[0]:
            padding = _transpose_padding(ctx.in_shapes[0][2:], gy.shape[2:], ksize, ctx.attrs)
            gx = apply(ConvTranspose2d, gy, ggw, output_padding=padding, **geometry)
        if ctx.needs_input_grad[1]:
            ggy = apply(Conv2d, x, ggw, **geometry)
        return gx, ggy


def _shape(value: Any) -> tuple[int, ...]:
    return tuple(value.shape) if hasattr(value, "shape") else np.shape(value)


def _add_bias(op: str, y: Any, b: Any, channels: int) -> Any:
    if b is None:
        return y
    if _shape(b) != (channels,):
        raise ShapeError(f"{op}: bias must have shape ({channels},), got {_shape(b)}")
    return y + reshape(b, (1, channels, 1, 1))


def conv2d(
    x: Any,
    w: Any,
    b: Any = None,
    stride: int | Pair = 1,
    pad: int | Pair = 0,
    dilation: int | Pair = 1,
    groups: int = 1,
) -> Any:
    """2-D convolution (cross-correlation) of x (N, C, H, W) with w (O, C/groups, kh, kw).

    Output size per spatial axis: ``(H + 2*pad - dilation*(kh-1) - 1) // stride + 1``; ``b`` is
    an optional bias of shape (O,).

    Example:
        >>> import numpy as np
        >>> from dualflow import ops
        >>> x = np.arange(16.0).reshape(1, 1, 4, 4)
        >>> ops.conv2d(x, np.ones((1, 1, 2, 2)), stride=2).tolist()
        [[[[10.0, 18.0], [42.0, 50.0]]]]
    """
    x, w, b = lower_inputs(x, w, b)  # autocast: the bias too, so the output stays low
    require_same_float("conv2d", x, w, "input", "weight")  # PyTorch refuses to upcast too
    y = apply(
        Conv2d,
        x,
        w,
        stride=pair("conv2d", "stride", stride, 1),
        pad=pair("conv2d", "pad", pad, 0),
        dilation=pair("conv2d", "dilation", dilation, 1),
        groups=int(groups),
    )
    return _add_bias("conv2d", y, b, y.shape[1])


def conv_transpose2d(
    x: Any,
    w: Any,
    b: Any = None,
    stride: int | Pair = 1,
    pad: int | Pair = 0,
    output_padding: int | Pair = 0,
    groups: int = 1,
    dilation: int | Pair = 1,
) -> Any:
    """Transposed convolution of x (N, Cin, H, W) with w (Cin, Cout/groups, kh, kw) (PyTorch).

    Output size per spatial axis:
    ``(H - 1)*stride - 2*pad + dilation*(kh - 1) + output_padding + 1``; it is the gradient of
    conv2d with respect to its input.

    Example:
        >>> import numpy as np
        >>> from dualflow import ops
        >>> y = ops.conv_transpose2d(np.ones((1, 1, 2, 2)), np.ones((1, 1, 2, 2)), stride=2)
        >>> y.shape
        (1, 1, 4, 4)
        >>> ops.conv_transpose2d(np.ones((1, 1, 2, 2)), np.ones((1, 1, 2, 2))).numpy()[0, 0]
        array([[1., 2., 1.],
               [2., 4., 2.],
               [1., 2., 1.]])
    """
    x, w, b = lower_inputs(x, w, b)
    require_same_float("conv_transpose2d", x, w, "input", "weight")
    y = apply(
        ConvTranspose2d,
        x,
        w,
        stride=pair("conv_transpose2d", "stride", stride, 1),
        pad=pair("conv_transpose2d", "pad", pad, 0),
        dilation=pair("conv_transpose2d", "dilation", dilation, 1),
        groups=int(groups),
        output_padding=pair("conv_transpose2d", "output_padding", output_padding, 0),
    )
    return _add_bias("conv_transpose2d", y, b, y.shape[1])


def conv2d_grad_weight(
    x: Any,
    gy: Any,
    ksize: int | Pair,
    stride: int | Pair = 1,
    pad: int | Pair = 0,
    dilation: int | Pair = 1,
    groups: int = 1,
) -> Any:
    """Gradient of ``sum(conv2d(x, w, ...) * gy)`` with respect to a w of spatial size ``ksize``.

    Example:
        >>> import numpy as np
        >>> from dualflow import ops
        >>> ops.conv2d_grad_weight(np.ones((1, 1, 3, 3)), np.ones((1, 2, 2, 2)), 2).shape
        (2, 1, 2, 2)
    """
    name = "conv2d_grad_weight"
    return apply(
        Conv2dGradWeight,
        x,
        gy,
        ksize=pair(name, "ksize", ksize, 1),
        stride=pair(name, "stride", stride, 1),
        pad=pair(name, "pad", pad, 0),
        dilation=pair(name, "dilation", dilation, 1),
        groups=int(groups),
    )
