"""2-D pooling ops (NCHW): max_pool2d and avg_pool2d with their gradient ops, global_avg_pool2d.

Pairs of ops are each other's adjoints, so any order of derivative closes over them:
``max_pool2d_grad`` scatters gy to each window's argmax and ``max_pool2d_gather`` reads values
back from those positions; ``avg_pool2d_grad`` spreads gy evenly and ``avg_pool2d`` averages.
The argmax is recomputed from the saved input, so no integer index array travels with the graph.
On numpy float32/float64 arrays every op runs a numba kernel of ``kernels.pool.pool_kernels``
(one pass per output, bit-equal to the numpy window loops here, which remain for other dtypes,
array modules and a missing numba); on cupy the forwards and avg_pool2d_grad run in cuDNN when
it can.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.errors import ShapeError
from dualflow.kernels.backend import backend_of, host_kernels
from dualflow.kernels.base.windows import Pair, offsets, out_size, pad_hw
from dualflow.ops.dispatch import apply
from dualflow.ops.geometry import check_4d, check_geometry, pair
from dualflow.ops.reduction import mean
from dualflow.ops.registry import Meta, primitive

_ONE = (1, 1)


def _kernels(xp: Any, *arrays: Any) -> Any:
    """``kernels.pool.pool_kernels`` when its numba kernels take these arrays, else None."""
    return host_kernels(xp, "pool", *arrays)


def _pooled_hw(op: str, x: Meta, ksize: Pair, stride: Pair, pad: Pair) -> Pair:
    check_4d(op, "x", x)
    check_geometry(op, stride, pad)
    if min(ksize) < 1 or pad[0] > ksize[0] // 2 or pad[1] > ksize[1] // 2:
        raise ShapeError(
            f"{op}: need ksize ≥ 1 and pad at most half of ksize, got ksize={ksize}, pad={pad} "
            f"for x {tuple(x.shape)}"
        )
    out = tuple(out_size(x.shape[2 + k], ksize[k], stride[k], pad[k]) for k in range(2))
    if min(out) < 1:
        raise ShapeError(
            f"{op}: output size {out} is not positive for x {tuple(x.shape)} with ksize={ksize}, "
            f"stride={stride}, pad={pad}; use a smaller window or more padding"
        )
    return out


def _check_same(op: str, name: str, meta: Meta, shape: tuple, x: Meta) -> None:
    check_4d(op, name, meta)
    if tuple(meta.shape) != tuple(shape):
        raise ShapeError(
            f"{op}: {name} must have shape {tuple(shape)} for x {tuple(x.shape)}, "
            f"got {tuple(meta.shape)}"
        )


def _argmax(xp: Any, x: Any, ksize: Pair, stride: Pair, pad: Pair) -> Any:
    """Tap index (row-major in the window) of each window's maximum; the first one wins ties."""
    out = tuple(out_size(x.shape[2 + k], ksize[k], stride[k], pad[k]) for k in range(2))
    padded = pad_hw(xp, x, pad, -np.inf)
    dtype = np.int8 if ksize[0] * ksize[1] < 128 else np.int32  # small: less memory traffic
    best = index = None
    for tap, (_, _, (rows, cols)) in enumerate(offsets(ksize, stride, _ONE, out)):
        window = padded[:, :, rows, cols]
        if best is None:
            best, index = window.copy(), xp.zeros(window.shape, dtype=dtype)
            continue
        better = window > best
        xp.copyto(index, dtype(tap), where=better)
        xp.maximum(best, window, out=best)  # faster than a masked copy
    return index


def _scatter(xp: Any, gy: Any, index: Any, hw: tuple, ksize: Pair, stride: Pair, pad: Pair) -> Any:
    """Add gy (N, C, Ho, Wo) into an (N, C, H, W) image at the taps ``index`` picks (all: None)."""
    n, c, ho, wo = gy.shape
    image = xp.zeros((n, c, hw[0] + 2 * pad[0], hw[1] + 2 * pad[1]), dtype=gy.dtype)
    disjoint = stride[0] >= ksize[0] and stride[1] >= ksize[1]
    for tap, (_, _, (rows, cols)) in enumerate(offsets(ksize, stride, _ONE, (ho, wo))):
        value = gy if index is None else xp.where(index == tap, gy, 0)
        if disjoint:  # windows do not overlap: every pixel is written once, no add needed
            image[:, :, rows, cols] = value
        else:
            image[:, :, rows, cols] += value
    if pad == (0, 0):
        return image
    return xp.ascontiguousarray(image[:, :, pad[0] : pad[0] + hw[0], pad[1] : pad[1] + hw[1]])


@primitive("max_pool2d", saves=("x0",), aliasing="fresh")
class MaxPool2d:
    """Maximum over each ksize window of x (N, C, H, W); padding counts as -inf."""

    def infer(x: Meta, *, ksize, stride, pad) -> tuple[Meta]:
        out = _pooled_hw("max_pool2d", x, ksize, stride, pad)
        return (Meta(tuple(x.shape[:2]) + out, x.dtype),)

    def forward(xp, x, *, ksize, stride, pad):
        library = backend_of(xp).library  # cuDNN on cupy
        if library is not None and library.usable(x):
            y = library.pool2d(x, "max", ksize, stride, pad)
            if y is not None:  # else cuDNN refused the case: the window loop below
                return y
        kernels = _kernels(xp, x)
        if kernels is not None:
            return kernels.max_pool2d(x, ksize, stride, pad)
        out = tuple(out_size(x.shape[2 + k], ksize[k], stride[k], pad[k]) for k in range(2))
        padded = pad_hw(xp, x, pad, -np.inf)
        y = None
        for _, _, (rows, cols) in offsets(ksize, stride, _ONE, out):
            window = padded[:, :, rows, cols]
            y = window.copy() if y is None else xp.maximum(y, window, out=y)
        return y

    def backward(ctx, gy):
        return apply(MaxPool2dGrad, ctx.x0, gy, **ctx.attrs)


@primitive("max_pool2d_grad", saves=("x0",), aliasing="fresh")
class MaxPool2dGrad:
    """Gradient of max_pool2d: gy (N, C, Ho, Wo) added at each window's argmax in x's shape."""

    def infer(x: Meta, gy: Meta, *, ksize, stride, pad) -> tuple[Meta]:
        out = _pooled_hw("max_pool2d_grad", x, ksize, stride, pad)
        _check_same("max_pool2d_grad", "gy", gy, tuple(x.shape[:2]) + out, x)
        return (Meta(tuple(x.shape), gy.dtype),)

    def forward(xp, x, gy, *, ksize, stride, pad):
        # No cuDNN here: cudnnPoolingBackward does not document which of several equal maxima
        # (common after relu) gets the gradient, and max_pool2d_gather, this op's adjoint, must
        # pick the same one (the first) for double backward to be exact.
        kernels = _kernels(xp, x, gy)
        if kernels is not None:
            return kernels.max_pool2d_grad(x, gy, ksize, stride, pad)
        index = _argmax(xp, x, ksize, stride, pad)
        return _scatter(xp, gy, index, x.shape[2:], ksize, stride, pad)

    def backward(ctx, ggx):
        # Piecewise constant in x (the argmax does not move under small changes): no x gradient.
        return None, apply(MaxPool2dGather, ctx.x0, ggx, **ctx.attrs)


@primitive("max_pool2d_gather", saves=("x0",), aliasing="fresh")
class MaxPool2dGather:
    """Read g (shaped like x) at the argmax of each of x's windows: max_pool2d_grad's adjoint."""

    def infer(x: Meta, g: Meta, *, ksize, stride, pad) -> tuple[Meta]:
        out = _pooled_hw("max_pool2d_gather", x, ksize, stride, pad)
        _check_same("max_pool2d_gather", "g", g, tuple(x.shape), x)
        return (Meta(tuple(x.shape[:2]) + out, g.dtype),)

    def forward(xp, x, g, *, ksize, stride, pad):
        kernels = _kernels(xp, x, g)
        if kernels is not None:
            return kernels.max_pool2d_gather(x, g, ksize, stride, pad)
        index = _argmax(xp, x, ksize, stride, pad)
        padded = pad_hw(xp, g, pad)
        y = xp.zeros(index.shape, dtype=g.dtype)
        for tap, (_, _, (rows, cols)) in enumerate(offsets(ksize, stride, _ONE, index.shape[2:])):
            xp.copyto(y, padded[:, :, rows, cols], where=index == tap)
        return y

    def backward(ctx, gy):
        return None, apply(MaxPool2dGrad, ctx.x0, gy, **ctx.attrs)


@primitive("avg_pool2d", aliasing="fresh")
class AvgPool2d:
    """Mean over each ksize window of x (N, C, H, W); padded zeros count in the divisor."""

    def infer(x: Meta, *, ksize, stride, pad) -> tuple[Meta]:
        out = _pooled_hw("avg_pool2d", x, ksize, stride, pad)
        return (Meta(tuple(x.shape[:2]) + out, x.dtype),)

    def forward(xp, x, *, ksize, stride, pad):
        library = backend_of(xp).library  # cuDNN on cupy
        if library is not None and library.usable(x):
            y = library.pool2d(x, "avg", ksize, stride, pad)
            if y is not None:
                return y
        kernels = _kernels(xp, x)
        if kernels is not None:
            return kernels.avg_pool2d(x, ksize, stride, pad)
        out = tuple(out_size(x.shape[2 + k], ksize[k], stride[k], pad[k]) for k in range(2))
        padded = pad_hw(xp, x, pad)
        y = None
        for _, _, (rows, cols) in offsets(ksize, stride, _ONE, out):
            window = padded[:, :, rows, cols]
            y = window.copy() if y is None else xp.add(y, window, out=y)
        y *= 1.0 / (ksize[0] * ksize[1])
        return y

    def backward(ctx, gy):
        return apply(AvgPool2dGrad, gy, shape=tuple(ctx.in_shapes[0][2:]), **ctx.attrs)


@primitive("avg_pool2d_grad", aliasing="fresh")
class AvgPool2dGrad:
    """Gradient of avg_pool2d: gy (N, C, Ho, Wo) spread evenly over the windows of an image."""

    def infer(gy: Meta, *, shape, ksize, stride, pad) -> tuple[Meta]:
        x = Meta(tuple(gy.shape[:2]) + tuple(shape), gy.dtype)
        out = _pooled_hw("avg_pool2d_grad", x, ksize, stride, pad)
        _check_same("avg_pool2d_grad", "gy", gy, tuple(gy.shape[:2]) + out, x)
        return (x,)

    def forward(xp, gy, *, shape, ksize, stride, pad):
        library = backend_of(xp).library  # cuDNN on cupy
        if library is not None and library.usable(gy):
            gx = library.avg_pool2d_grad(gy, shape, ksize, stride, pad)
            if gx is not None:
                return gx
        kernels = _kernels(xp, gy)
        if kernels is not None:
            return kernels.avg_pool2d_grad(gy, shape, ksize, stride, pad)
        scaled = gy * gy.dtype.type(1.0 / (ksize[0] * ksize[1]))
        return _scatter(xp, scaled, None, shape, ksize, stride, pad)

    def backward(ctx, ggx):
        attrs = {k: ctx.attrs[k] for k in ("ksize", "stride", "pad")}
        return apply(AvgPool2d, ggx, **attrs)


def _pool_attrs(op: str, ksize: Any, stride: Any, pad: Any) -> dict:
    ksize = pair(op, "ksize", ksize, 1)
    stride = ksize if stride is None else pair(op, "stride", stride, 1)
    return {"ksize": ksize, "stride": stride, "pad": pair(op, "pad", pad, 0)}


def max_pool2d(
    x: Any, ksize: int | Pair, stride: int | Pair | None = None, pad: int | Pair = 0
) -> Any:
    """Max pooling of x (N, C, H, W); ``stride`` defaults to ``ksize``, padding is -inf.

    The output size is ``(H + 2*pad - ksize) // stride + 1`` (PyTorch's floor mode) and ``pad``
    may be at most half the window.

    Example:
        >>> import numpy as np
        >>> from dualflow import ops
        >>> ops.max_pool2d(np.arange(16.0).reshape(1, 1, 4, 4), 2).tolist()
        [[[[5.0, 7.0], [13.0, 15.0]]]]
    """
    return apply(MaxPool2d, x, **_pool_attrs("max_pool2d", ksize, stride, pad))


def max_pool2d_grad(
    x: Any, gy: Any, ksize: int | Pair, stride: int | Pair | None = None, pad: int | Pair = 0
) -> Any:
    """Gradient of ``sum(max_pool2d(x, ...) * gy)`` with respect to x.

    Example:
        >>> import numpy as np
        >>> from dualflow import ops
        >>> x = np.array([[[[1.0, 4.0], [3.0, 2.0]]]])
        >>> ops.max_pool2d_grad(x, np.ones((1, 1, 1, 1)), 2).tolist()
        [[[[0.0, 1.0], [0.0, 0.0]]]]
    """
    return apply(MaxPool2dGrad, x, gy, **_pool_attrs("max_pool2d_grad", ksize, stride, pad))


def max_pool2d_gather(
    x: Any, g: Any, ksize: int | Pair, stride: int | Pair | None = None, pad: int | Pair = 0
) -> Any:
    """Values of g (shaped like x) at the positions max_pool2d picks in x's windows.

    Example:
        >>> import numpy as np
        >>> from dualflow import ops
        >>> x = np.array([[[[1.0, 4.0], [3.0, 2.0]]]])
        >>> ops.max_pool2d_gather(x, 10 * x + 1, 2).tolist()
        [[[[41.0]]]]
    """
    return apply(MaxPool2dGather, x, g, **_pool_attrs("max_pool2d_gather", ksize, stride, pad))


def avg_pool2d(
    x: Any, ksize: int | Pair, stride: int | Pair | None = None, pad: int | Pair = 0
) -> Any:
    """Average pooling of x (N, C, H, W); padded zeros count (PyTorch's count_include_pad).

    Example:
        >>> import numpy as np
        >>> from dualflow import ops
        >>> ops.avg_pool2d(np.arange(16.0).reshape(1, 1, 4, 4), 2).tolist()
        [[[[2.5, 4.5], [10.5, 12.5]]]]
    """
    return apply(AvgPool2d, x, **_pool_attrs("avg_pool2d", ksize, stride, pad))


def avg_pool2d_grad(
    gy: Any,
    shape: tuple[int, int],
    ksize: int | Pair,
    stride: int | Pair | None = None,
    pad: int | Pair = 0,
) -> Any:
    """Gradient of ``sum(avg_pool2d(x, ...) * gy)`` with respect to an x of spatial ``shape``.

    Example:
        >>> import numpy as np
        >>> from dualflow import ops
        >>> ops.avg_pool2d_grad(np.ones((1, 1, 1, 1)), (2, 2), 2).tolist()
        [[[[0.25, 0.25], [0.25, 0.25]]]]
    """
    attrs = _pool_attrs("avg_pool2d_grad", ksize, stride, pad)
    return apply(AvgPool2dGrad, gy, shape=pair("avg_pool2d_grad", "shape", shape, 1), **attrs)


def global_avg_pool2d(x: Any) -> Any:
    """Mean over the spatial axes of x (N, C, H, W), giving (N, C).

    Example:
        >>> import numpy as np
        >>> from dualflow import ops
        >>> ops.global_avg_pool2d(np.arange(8.0).reshape(1, 2, 2, 2)).tolist()
        [[1.5, 5.5]]
    """
    shape = tuple(x.shape) if hasattr(x, "shape") else np.shape(x)
    if len(shape) != 4:
        raise ShapeError(f"global_avg_pool2d: x must be 4-D (N, C, H, W), got shape {shape}")
    return mean(x, axis=(2, 3))
