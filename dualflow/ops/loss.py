"""Losses: softmax cross entropy (a primitive, with ``one_hot``), sigmoid cross entropy and
mean squared error (composites).

Integer labels equal to ``ignore_label`` contribute zero and are left out of the mean's count
(Chainer's convention); labels outside ``[0, C)`` raise a ShapeError naming the op.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dualflow.errors import DTypeError, ShapeError, user_frame, with_location
from dualflow.kernels.backend import host_kernels
from dualflow.ops.activation import softplus
from dualflow.ops.arithmetic import cast, maximum, multiply, not_equal, subtract
from dualflow.ops.creation import ones_like
from dualflow.ops.dispatch import apply
from dualflow.ops.reduction import inverse_count, mean
from dualflow.ops.reduction import sum as reduce_sum
from dualflow.ops.registry import Meta, primitive
from dualflow.ops.shape import expand_dims
from dualflow.ops.softmax import softmax
from dualflow.ops.validate import check_index_range, require_float, require_int

_REDUCE = {"mean": "mean", "sum": "sum", "no": "no", "none": "no"}


@primitive("one_hot", aliasing="fresh")
class OneHot:
    """One-hot vectors of integer labels along a new ``axis``; not differentiable."""

    def infer(labels: Meta, *, num_classes: int, axis: int, dtype: str) -> tuple[Meta]:
        require_int("one_hot", labels)
        if num_classes < 1:
            raise ShapeError(f"one_hot: num_classes must be positive, got {num_classes}")
        ndim = len(labels.shape) + 1
        if not -ndim <= axis < ndim:
            raise ShapeError(f"one_hot: axis {axis} is out of range for output rank {ndim}")
        shape = list(labels.shape)
        shape.insert(axis % ndim, num_classes)
        return (Meta(tuple(shape), np.dtype(dtype)),)

    def forward(xp, labels, *, num_classes, axis, dtype):
        check_index_range("one_hot", xp, labels, num_classes, "labels")
        axis %= labels.ndim + 1
        classes = xp.arange(num_classes).reshape((-1,) + (1,) * (labels.ndim - axis))
        return (xp.expand_dims(labels, axis) == classes).astype(dtype)


def one_hot(labels: Any, num_classes: int, dtype: Any = "float32", axis: int = -1) -> Any:
    """One-hot encoding: output ``[..., c]`` is 1 where ``labels == c`` (new axis at ``axis``).

    Example:
        >>> from dualflow import ops
        >>> ops.one_hot([2, 0], 3).tolist()
        [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    """
    return apply(
        OneHot, labels, num_classes=int(num_classes), axis=int(axis), dtype=np.dtype(dtype).name
    )


def _check_logits(op: str, x: Meta, t: Meta) -> np.dtype:
    dtype = require_float(op, x, "x (logits)")
    require_int(op, t)
    if len(x.shape) < 2:
        raise ShapeError(f"{op}: x must be (N, C) or (N, C, ...), got shape {tuple(x.shape)}")
    want = tuple(x.shape[:1]) + tuple(x.shape[2:])
    if tuple(t.shape) != want:
        raise ShapeError(
            f"{op}: labels of shape {tuple(t.shape)} do not match x of shape {tuple(x.shape)}; "
            f"expected labels of shape {want}"
        )
    return dtype


@primitive("softmax_cross_entropy", saves=("x0", "x1"), autocast="float32", aliasing="fresh")
class SoftmaxCrossEntropy:
    """``-log softmax(x)[label]`` over the class axis 1, reduced by mean, sum or not at all."""

    def infer(x: Meta, t: Meta, *, ignore_label: int, reduce: str) -> tuple[Meta]:
        dtype = _check_logits("softmax_cross_entropy", x, t)
        shape = tuple(t.shape) if reduce == "no" else ()
        return (Meta(shape, dtype),)

    def forward(xp, x, t, *, ignore_label, reduce):
        kernels = _kernels(xp, x, t)
        if kernels is None:
            return _numpy_loss(xp, x, t, ignore_label, reduce)
        losses, count, bad = kernels.row_losses(_rows(x), t.reshape(-1), ignore_label)
        if bad:
            check_index_range("softmax_cross_entropy", xp, t, x.shape[1], "labels", ignore_label)
        return _reduced(losses, count, x, t, reduce)

    def backward(ctx, gy):
        attrs = ctx.attrs
        return softmax_cross_entropy_grad(ctx.x0, ctx.x1, gy, **attrs), None


def _reduced(losses: Any, count: int, x: Any, t: Any, reduce: str) -> Any:
    """The loss from the kernels' per-row float64 losses (``count`` rows counted)."""
    if reduce == "no":
        return losses.astype(x.dtype).reshape(t.shape)
    total = float(losses.sum())
    if reduce == "mean":  # NaN over no labels (an empty batch, all ignored), as PyTorch
        total = total / count if count else math.nan
    return np.asarray(total, dtype=x.dtype)


def _numpy_loss(xp: Any, x: Any, t: Any, ignore_label: int, reduce: str) -> Any:
    """The loss in array-module calls (cupy, float16, no numba)."""
    check_index_range("softmax_cross_entropy", xp, t, x.shape[1], "labels", ignore_label)
    valid = t != ignore_label
    z = x - x.max(axis=1, keepdims=True)
    lse = xp.log(xp.exp(z).sum(axis=1, keepdims=True))
    picked = xp.take_along_axis(z, xp.expand_dims(xp.where(valid, t, 0), 1), axis=1)
    loss = xp.where(valid, (lse - picked)[:, 0], 0).astype(x.dtype)
    if reduce == "no":
        return loss
    total = loss.sum()
    if reduce == "mean":  # no device sync to test the count first
        with np.errstate(invalid="ignore"):
            total = total / valid.sum().astype(x.dtype)
    return xp.asarray(total, dtype=x.dtype)


def _gy_shape(x: Meta, t: Meta, gy: Meta, reduce: str) -> None:
    want = tuple(t.shape) if reduce == "no" else ()
    if tuple(gy.shape) != want:
        raise ShapeError(
            f"softmax_cross_entropy_grad: gy of shape {tuple(gy.shape)} does not match the "
            f"loss of x {tuple(x.shape)} with reduce={reduce!r}; expected shape {want}"
        )


@primitive(
    "softmax_cross_entropy_grad", saves=("x0", "x1", "x2"), autocast="float32", aliasing="fresh"
)
class SoftmaxCrossEntropyGrad:
    """softmax_cross_entropy's gradient in x: ``(softmax(x) - onehot(t)) * w`` over axis 1, where
    ``w`` is ``gy`` (divided by the labels counted for ``reduce="mean"``), 0 where ignored."""

    def infer(x: Meta, t: Meta, gy: Meta, *, ignore_label: int, reduce: str) -> tuple[Meta]:
        dtype = _check_logits("softmax_cross_entropy_grad", x, t)
        _gy_shape(x, t, gy, reduce)
        return (Meta(tuple(x.shape), dtype),)

    def forward(xp, x, t, gy, *, ignore_label, reduce):
        kernels = _kernels(xp, x, t)
        if kernels is None:
            return _numpy_grad(xp, x, t, gy, ignore_label, reduce)
        labels = t.reshape(-1)
        g = _grad_weights(kernels, labels, gy, ignore_label, reduce)
        gx, bad = kernels.row_grads(_rows(x), labels, ignore_label, g)
        if bad:
            check_index_range("softmax_cross_entropy", xp, t, x.shape[1], "labels", ignore_label)
        return _unrows(gx, x.shape)

    def backward(ctx, g):
        x, t, gy = ctx.x0, ctx.x1, ctx.x2
        attrs = ctx.attrs
        # linear in gy: the gradient at gy = 1, summed against g per loss element
        unit = softmax_cross_entropy_grad(x, t, ones_like(gy), **attrs)
        axis = 1 if attrs["reduce"] == "no" else None
        ggy = reduce_sum(g * unit, axis=axis)
        # in x: softmax's adjoint of g times each row's weight
        weighted = g * expand_dims(_row_weights(x, t, gy, **attrs), 1)
        y = softmax(x, axis=1)
        return y * (weighted - reduce_sum(weighted * y, axis=1, keepdims=True)), None, ggy


def _grad_weights(kernels: Any, labels: Any, gy: Any, ignore_label: int, reduce: str) -> Any:
    """Each row's float64 weight in the gradient kernels: ``gy``'s, divided by the labels counted
    for ``reduce="mean"`` (rounded once with the rest of the row)."""
    if reduce == "no":
        return gy.reshape(-1)
    scale = np.float64(gy)
    if reduce == "mean":
        scale /= max(kernels.count_kept(labels, ignore_label), 1)
    return np.full(labels.shape, scale)


def _row_weights(x: Any, t: Any, gy: Any, *, ignore_label: int, reduce: str) -> Any:
    """Each loss element's weight in the gradient, with ops: gy, 0 where ignored, divided by the
    labels counted for ``reduce="mean"`` (at least 1: all ignored gives 0, PyTorch's)."""
    weight = cast(not_equal(t, ignore_label), x.dtype)
    if reduce == "mean":
        return weight * (gy / maximum(reduce_sum(weight), 1.0))
    return weight * gy


def _numpy_grad(xp: Any, x: Any, t: Any, gy: Any, ignore_label: int, reduce: str) -> Any:
    """The gradient in array-module calls (cupy, float16, no numba)."""
    check_index_range("softmax_cross_entropy", xp, t, x.shape[1], "labels", ignore_label)
    valid = t != ignore_label
    weight = valid.astype(x.dtype)
    if reduce == "mean":
        weight = weight * (gy / xp.maximum(weight.sum(), 1)).astype(x.dtype)
    else:
        weight = weight * gy
    classes = xp.arange(x.shape[1]).reshape((-1,) + (1,) * (x.ndim - 2))
    target = xp.expand_dims(xp.where(valid, t, 0), 1) == classes
    e = xp.exp(x - x.max(axis=1, keepdims=True))
    e /= e.sum(axis=1, keepdims=True)
    return ((e - target) * xp.expand_dims(weight, 1)).astype(x.dtype)


def softmax_cross_entropy_grad(
    x: Any, labels: Any, gy: Any, ignore_label: int = -1, reduce: str = "mean"
) -> Any:
    """softmax_cross_entropy's gradient in ``x`` for the loss's gradient ``gy`` (one kernel per
    call on numpy float32/float64; eager and compiled share it).

    Example:
        >>> from dualflow import ops
        >>> ops.softmax_cross_entropy_grad([[0.0, 0.0]], [1], 1.0).tolist()
        [[0.5, -0.5]]
    """
    mode = _reduce_mode("softmax_cross_entropy_grad", reduce)
    attrs = {"ignore_label": int(ignore_label), "reduce": mode}
    return apply(SoftmaxCrossEntropyGrad, x, labels, gy, **attrs)


def _kernels(xp: Any, x: Any, t: Any) -> Any:
    """``kernels.loss.cross_entropy`` when its numba kernels take these arrays, else None."""
    return host_kernels(xp, "cross_entropy", x, t)


def _rows(x: Any) -> Any:
    """(N, C, d1, ...) logits as (N * d1 * ..., C) rows, in the labels' order."""
    return x if x.ndim == 2 else np.moveaxis(x, 1, -1).reshape(-1, x.shape[1])


def _unrows(rows: Any, shape: tuple[int, ...]) -> Any:
    """``_rows``' inverse, C-ordered."""
    if len(shape) == 2:
        return rows
    moved = rows.reshape((shape[0], *shape[2:], shape[1]))
    return np.ascontiguousarray(np.moveaxis(moved, -1, 1))


def _reduce_mode(op: str, reduce: str) -> str:
    if reduce not in _REDUCE:
        raise ValueError(f"{op}: reduce must be 'mean', 'sum' or 'no', got {reduce!r}")
    return _REDUCE[reduce]


def softmax_cross_entropy(x: Any, labels: Any, ignore_label: int = -1, reduce: str = "mean") -> Any:
    """Cross entropy of softmax(x) over axis 1 and integer ``labels`` (stable for huge logits).

    Args:
        x: logits of shape (N, C) or (N, C, d1, ...).
        labels: integer class ids of shape (N,) or (N, d1, ...); ``ignore_label`` entries give 0
            and are not counted by ``reduce="mean"``.
        ignore_label: the label value to skip.
        reduce: ``"mean"`` (over the labels not ignored; NaN when there are none, e.g. an empty
            batch, as PyTorch's ``cross_entropy``; its gradient is then 0), ``"sum"``, or
            ``"no"``/``"none"`` (per-label losses, shaped like ``labels``).

    Example:
        >>> from dualflow import ops
        >>> round(ops.softmax_cross_entropy([[0.0, 0.0], [5.0, 1.0]], [1, -1]).item(), 4)
        0.6931
    """
    mode = _reduce_mode("softmax_cross_entropy", reduce)
    return apply(SoftmaxCrossEntropy, x, labels, ignore_label=int(ignore_label), reduce=mode)


def _shape_dtype(value: Any) -> tuple[tuple[int, ...], np.dtype]:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return tuple(value.shape), np.dtype(value.dtype)
    array = np.asarray(value)
    return array.shape, array.dtype


def _inverse_size(shape: tuple[int, ...]) -> float:
    return inverse_count("sigmoid_cross_entropy", math.prod(shape), lambda: f"x of shape {shape}")


def sigmoid_cross_entropy(x: Any, t: Any, reduce: str = "mean") -> Any:
    """Binary cross entropy of ``sigmoid(x)`` and targets ``t`` (the logits' shape).

    ``t`` holds integer labels in {0, 1}, where -1 marks an element to ignore, or floating-point
    probabilities in [0, 1] (soft targets, e.g. a VAE's pixels), none ignored. Uses the stable
    form ``softplus(x) - x * t``; ``reduce="mean"`` averages over the targets not ignored
    (Chainer's ``normalize=True``), ``"sum"`` sums, ``"no"`` keeps every element.

    Example:
        >>> from dualflow import ops
        >>> round(ops.sigmoid_cross_entropy([[0.0, 1e4]], [[1, -1]]).item(), 4)
        0.6931
        >>> round(ops.sigmoid_cross_entropy([0.0, 0.0], [0.25, 0.75]).item(), 4)
        0.6931
    """
    mode = _reduce_mode("sigmoid_cross_entropy", reduce)
    (x_shape, x_dtype), (t_shape, t_dtype) = _shape_dtype(x), _shape_dtype(t)
    require_float("sigmoid_cross_entropy", Meta(x_shape, x_dtype), "x (logits)")
    if t_dtype.kind not in "iuf":
        raise DTypeError(
            with_location(
                f"sigmoid_cross_entropy: t (targets) must be integer labels in {{0, 1}} (-1 to "
                f"ignore) or floating-point probabilities in [0, 1], got {t_dtype}",
                user_frame(),
            )
        )
    if x_shape != t_shape:
        raise ShapeError(
            f"sigmoid_cross_entropy: x of shape {x_shape} and t of shape {t_shape} must match"
        )
    if t_dtype.kind == "f":  # probabilities: every element counts
        loss = softplus(x) - multiply(x, cast(t, x_dtype))
        if mode == "no":
            return loss
        total = reduce_sum(loss)
        return total if mode == "sum" else total * _inverse_size(x_shape)
    valid = cast(not_equal(t, -1), x_dtype)
    loss = (softplus(x) - multiply(x, cast(t, x_dtype))) * valid
    if mode == "no":
        return loss
    total = reduce_sum(loss)
    if mode == "sum":
        return total
    if not math.prod(x_shape):  # an empty batch: NaN, as PyTorch's mean over no elements
        return total * _inverse_size(x_shape)
    return total / maximum(reduce_sum(valid), 1.0)  # all ignored: 0 (Chainer's count >= 1)


def mean_squared_error(x0: Any, x1: Any) -> Any:
    """Mean of ``(x0 - x1) ** 2`` over all elements; the shapes must match.

    Example:
        >>> from dualflow import ops
        >>> ops.mean_squared_error([1.0, 2.0], [0.0, 4.0]).item()
        2.5
    """
    (s0, d0), (s1, d1) = _shape_dtype(x0), _shape_dtype(x1)
    require_float("mean_squared_error", Meta(s0, d0), "x0")
    require_float("mean_squared_error", Meta(s1, d1), "x1")
    if s0 != s1:
        raise ShapeError(f"mean_squared_error: shapes {s0} and {s1} must match")
    diff = subtract(x0, x1)
    return mean(diff * diff)
