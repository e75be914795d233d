"""Cumulative (scan) ops along one axis: cumsum, cumprod, cummax, cummin, logcumsumexp.

Primitives with numpy's accumulate kernels; their backward passes are written with ops, so they
differentiate twice. ``cumsum`` and ``logcumsumexp`` take ``reverse`` (a scan from the end), which
their backward passes need: the adjoint of a running sum is the reversed running sum.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.errors import ShapeError
from dualflow.ops.arithmetic import cast, equal, exp, greater, less, log, where
from dualflow.ops.dispatch import apply
from dualflow.ops.gather import take_along_axis_grad
from dualflow.ops.reduction import sum as reduce_sum
from dualflow.ops.registry import Meta, primitive
from dualflow.ops.validate import require_float


def _check_axis(op: str, x: Meta, axis: int) -> tuple:
    shape = tuple(x.shape)
    if not -max(len(shape), 1) <= axis < max(len(shape), 1):
        raise ShapeError(f"{op}: axis {axis} is out of range for input shape {shape}")
    return shape


def _scan(xp: Any, ufunc: Any, x: Any, axis: int, reverse: bool = False) -> Any:
    """``ufunc.accumulate`` along ``axis`` (from the end when ``reverse``), C-ordered."""
    if x.ndim == 0:
        return x.copy()
    if reverse:
        return xp.ascontiguousarray(xp.flip(ufunc.accumulate(xp.flip(x, axis), axis=axis), axis))
    return xp.ascontiguousarray(ufunc.accumulate(x, axis=axis))


def _promoted(dtype: Any) -> np.dtype:
    """numpy's (and PyTorch's) result type of a running sum or product: bools and ints widen."""
    return np.cumsum(np.ones(1, dtype=dtype)).dtype


@primitive("cumsum", aliasing="fresh", layout="C", autocast="float32_cuda")
class Cumsum:
    """Running sum along ``axis`` (from the end when ``reverse``); ints and bools give int64."""

    def infer(x: Meta, *, axis: int, reverse: bool) -> tuple[Meta]:
        return (Meta(_check_axis("cumsum", x, axis), _promoted(x.dtype)),)

    def forward(xp, x, *, axis, reverse):
        x = x.astype(_promoted(x.dtype), copy=False)
        return _scan(xp, xp.add, x, axis, reverse)

    def backward(ctx, gy):
        attrs = ctx.attrs
        return apply(Cumsum, gy, axis=attrs["axis"], reverse=not attrs["reverse"])


def _cumprod_backward(ctx: Any, gy: Any) -> Any:
    # Where no zero precedes x_i, d y_j / d x_i = y_j / x_i (j >= i): a reversed running sum of
    # gy * y over x_i. At the first zero (position k) the other factors of y_j are the running
    # product with x_k taken as 1 (A1). Later gradients hold the factor x_k = 0: their value is
    # 0, but written as x_k times the rest (A1 / x_i up to the second zero, A2 at it) their
    # derivative in x_k, the second derivative, is exact too.
    x, y, axis = ctx.x0, ctx.y, ctx.attrs["axis"]
    if x.ndim == 0:
        return gy
    zero = cast(equal(x, 0), x.dtype)
    seen = apply(Cumsum, zero, axis=axis, reverse=False)
    before, first, second = equal(seen, 0), equal(zero * seen, 1), equal(zero * seen, 2)
    between = equal(seen + zero, 1)  # after the first zero, before the second
    upper = apply(Cumsum, gy * y, axis=axis, reverse=True)
    grad = where(before, upper / where(before, x, 1), 0)
    ones1 = where(first, 1, x)
    a1 = apply(Cumsum, gy * apply(Cumprod, ones1, axis=axis), axis=axis, reverse=True)
    ones2 = where(second, 1, ones1)
    a2 = apply(Cumsum, gy * apply(Cumprod, ones2, axis=axis), axis=axis, reverse=True)
    x_first = reduce_sum(where(first, x, 0), axis, keepdims=True)
    later = where(between, a1 / where(between, x, 1), 0) + where(second, a2, 0)
    return grad + where(first, a1, 0) + x_first * later


@primitive("cumprod", saves=("x0", "y"), aliasing="fresh", layout="C", autocast="float32")
class Cumprod:
    """Running product along ``axis``; exact gradients where factors are zero."""

    def infer(x: Meta, *, axis: int) -> tuple[Meta]:
        return (Meta(_check_axis("cumprod", x, axis), _promoted(x.dtype)),)

    def forward(xp, x, *, axis):
        return _scan(xp, xp.multiply, x.astype(_promoted(x.dtype), copy=False), axis)

    backward = _cumprod_backward


def _running_extreme(xp: Any, ufunc: Any, x: Any, axis: int) -> tuple[Any, Any]:
    """Running max/min and the index it was last reached at (PyTorch: ties and NaNs move it)."""
    if x.ndim == 0:
        return x.copy(), xp.zeros((), np.int64)
    values = _scan(xp, ufunc, x, axis)
    hit = x == values  # x_i is the running extreme: PyTorch's >= / <= update
    if x.dtype.kind in "fc":
        hit |= xp.isnan(x)  # a NaN becomes (and stays) the extreme; each new NaN moves the index
    shape = [-1 if d == axis else 1 for d in range(x.ndim)]
    where_hit = xp.where(hit, xp.arange(x.shape[axis], dtype=np.int64).reshape(shape), 0)
    return values, _scan(xp, xp.maximum, where_hit, axis)


def _extreme_backward(ctx: Any, gvalues: Any, gindices: Any) -> Any:
    if gvalues is None:
        return None
    if gvalues.ndim == 0:
        return gvalues
    return take_along_axis_grad(gvalues, ctx.y1, ctx.in_shapes[0], ctx.attrs["axis"])


def _extreme_infer(op: str, x: Meta, axis: int) -> tuple[Meta, Meta]:
    shape = _check_axis(op, x, axis)
    return (Meta(shape, x.dtype), Meta(shape, np.dtype(np.int64)))


@primitive("cummax", saves=("y1",), nout=2, aliasing="fresh", layout="C")
class Cummax:
    """``(values, indices)`` of the running maximum along ``axis``."""

    def infer(x: Meta, *, axis: int) -> tuple[Meta, Meta]:
        return _extreme_infer("cummax", x, axis)

    def forward(xp, x, *, axis):
        return _running_extreme(xp, xp.maximum, x, axis)

    backward = _extreme_backward


@primitive("cummin", saves=("y1",), nout=2, aliasing="fresh", layout="C")
class Cummin:
    """``(values, indices)`` of the running minimum along ``axis``."""

    def infer(x: Meta, *, axis: int) -> tuple[Meta, Meta]:
        return _extreme_infer("cummin", x, axis)

    def forward(xp, x, *, axis):
        return _running_extreme(xp, xp.minimum, x, axis)

    backward = _extreme_backward


def _logcumsumexp_backward(ctx: Any, gy: Any) -> Any:
    # d y_i / d x_j = exp(x_j - y_i) for j <= i, so gx_j = sum_i gy_i exp(x_j - y_i): summed in
    # log space (PyTorch's method), the positive and the negative gy apart; masked entries are
    # a finite floor, so no inf - inf reaches a second derivative. A zero gy_i is in neither
    # part, which would lose d gx / d gy_i: ``zero`` is exactly 0 but carries that derivative.
    x, y, attrs = ctx.x0, ctx.y, ctx.attrs
    if x.ndim == 0:
        return gy
    axis, reverse = attrs["axis"], not attrs["reverse"]
    floor = float(np.finfo(np.dtype(x.dtype)).min) / 4

    def summed(logs: Any) -> Any:
        return exp(x + apply(LogCumsumExp, logs, axis=axis, reverse=reverse))

    def part(mask: Any, g: Any) -> Any:
        return summed(where(mask, log(where(mask, g, 1)) - y, floor))

    at_zero = cast(equal(gy, 0), gy.dtype) * gy  # the value 0 where gy is 0, with its derivative
    zero = summed(log(at_zero + 1) - y) - summed(-y)
    return part(greater(gy, 0), gy) - part(less(gy, 0), -gy) + zero


@primitive("logcumsumexp", saves=("x0", "y"), aliasing="fresh", layout="C", autocast="float32")
class LogCumsumExp:
    """``log(cumsum(exp(x)))`` along ``axis``, stable for large inputs (running logaddexp)."""

    def infer(x: Meta, *, axis: int, reverse: bool) -> tuple[Meta]:
        shape = _check_axis("logcumsumexp", x, axis)
        return (Meta(shape, require_float("logcumsumexp", x)),)

    def forward(xp, x, *, axis, reverse):
        with np.errstate(invalid="ignore"):  # logaddexp(-inf, -inf) is -inf, as PyTorch's
            return _scan(xp, xp.logaddexp, x, axis, reverse)

    backward = _logcumsumexp_backward


def _axis(x: Any, axis: int) -> int:
    """A valid axis as non-negative (one attr per meaning); an invalid one reaches infer."""
    ndim = len(np.shape(x)) if not hasattr(x, "ndim") else x.ndim
    return int(axis) % max(ndim, 1) if -max(ndim, 1) <= int(axis) < max(ndim, 1) else int(axis)


def cumsum(x: Any, axis: int, reverse: bool = False) -> Any:
    """Running sum along ``axis`` (from the end when ``reverse``).

    Example:
        >>> from dualflow import ops
        >>> ops.cumsum([1.0, 2.0, 3.0], 0).tolist(), ops.cumsum([1, 2, 3], 0, reverse=True).tolist()
        ([1.0, 3.0, 6.0], [6, 5, 3])
    """
    return apply(Cumsum, x, axis=_axis(x, axis), reverse=bool(reverse))


def cumprod(x: Any, axis: int) -> Any:
    """Running product along ``axis``.

    Example:
        >>> from dualflow import ops
        >>> ops.cumprod([2.0, 3.0, 0.0, 5.0], 0).tolist()
        [2.0, 6.0, 0.0, 0.0]
    """
    return apply(Cumprod, x, axis=_axis(x, axis))


def cummax(x: Any, axis: int) -> tuple[Any, Any]:
    """``(values, indices)`` of the running maximum along ``axis`` (ties: the latest index).

    Example:
        >>> from dualflow import ops
        >>> values, indices = ops.cummax([1.0, 3.0, 2.0, 3.0], 0)
        >>> values.tolist(), indices.tolist()
        ([1.0, 3.0, 3.0, 3.0], [0, 1, 1, 3])
    """
    return apply(Cummax, x, axis=_axis(x, axis))


def cummin(x: Any, axis: int) -> tuple[Any, Any]:
    """``(values, indices)`` of the running minimum along ``axis`` (ties: the latest index).

    Example:
        >>> from dualflow import ops
        >>> values, indices = ops.cummin([3.0, 1.0, 2.0, 1.0], 0)
        >>> values.tolist(), indices.tolist()
        ([3.0, 1.0, 1.0, 1.0], [0, 1, 1, 3])
    """
    return apply(Cummin, x, axis=_axis(x, axis))


def logcumsumexp(x: Any, axis: int, reverse: bool = False) -> Any:
    """``log(cumsum(exp(x)))`` along ``axis`` without overflow.

    Example:
        >>> from dualflow import ops
        >>> [round(v, 4) for v in ops.logcumsumexp([1000.0, 1000.0], 0).tolist()]
        [1000.0, 1000.6931]
    """
    return apply(LogCumsumExp, x, axis=_axis(x, axis), reverse=bool(reverse))
