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
from dualflow.ops.activation import softplus
from dualflow.ops.arithmetic import cast, maximum, multiply, not_equal, subtract, where
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
        check_index_range("softmax_cross_entropy", xp, t, x.shape[1], "labels", ignore_label)
        valid = t != ignore_label
        z = x - x.max(axis=1, keepdims=True)
        lse = xp.log(xp.exp(z).sum(axis=1, keepdims=True))
        picked = xp.take_along_axis(z, xp.expand_dims(xp.where(valid, t, 0), 1), axis=1)
        loss = xp.where(valid, (lse - picked)[:, 0], 0).astype(x.dtype)
        if reduce == "no":
            return loss
        total = loss.sum()
        if reduce == "mean":  # NaN over no labels (an empty batch, all ignored), as PyTorch
            with np.errstate(invalid="ignore"):  # no device sync to test the count first
                total = total / valid.sum().astype(x.dtype)
        return xp.asarray(total, dtype=x.dtype)

    def backward(ctx, gy):
        x, t = ctx.x0, ctx.x1
        ignore, reduce = ctx.attrs["ignore_label"], ctx.attrs["reduce"]
        valid = not_equal(t, ignore)
        weight = cast(valid, x.dtype)
        if reduce == "mean":  # with no labels the loss is NaN but the gradient 0 (PyTorch's)
            weight = weight * (gy / maximum(reduce_sum(weight), 1.0))
        else:
            weight = weight * gy
        target = one_hot(where(valid, t, 0), x.shape[1], x.dtype, axis=1)
        return (softmax(x, axis=1) - target) * expand_dims(weight, 1), None


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
