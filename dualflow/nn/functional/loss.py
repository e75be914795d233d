"""Loss functions with PyTorch's signatures and formulas: cross_entropy (weight, ignore_index,
label_smoothing, probability targets), nll_loss, binary_cross_entropy(_with_logits), mse_loss,
l1_loss, smooth_l1_loss, huber_loss, kl_div.

Bad input raises a typed error naming the function, the shapes/dtypes and the user's line.
The common case of ``cross_entropy`` (integer labels, no weight or smoothing) is the fused
``ops.softmax_cross_entropy`` primitive; the others are composites of ops.
"""

from __future__ import annotations

from typing import Any

from dualflow import ops
from dualflow.dtypes import is_float_dtype
from dualflow.errors import DTypeError, ShapeError, with_location
from dualflow.ops.autocast import float32_inputs
from dualflow.tensor.core import Tensor, as_tensor

_REDUCTIONS = ("mean", "sum", "none")


def reduction_mode(op: str, size_average: Any, reduce: Any, reduction: str) -> str:
    """``reduction``, or PyTorch's legacy ``size_average``/``reduce`` flags turned into it.

    Example:
        >>> reduction_mode("mse", None, False, "mean"), reduction_mode("l1", False, None, "mean")
        ('none', 'sum')
    """
    if size_average is not None or reduce is not None:
        if reduce is False:
            return "none"
        return "sum" if size_average is False else "mean"
    if reduction not in _REDUCTIONS + ("batchmean",) or (
        reduction == "batchmean" and op != "kl_div"
    ):
        raise ValueError(with_location(f"{op}: {reduction!r} is not a valid value for reduction"))
    return reduction


def _reduce(loss: Any, mode: str) -> Any:
    if mode == "none":
        return loss
    return loss.sum() if mode == "sum" else loss.mean()


def _float(op: str, x: Any, what: str) -> Tensor:
    x = as_tensor(x)
    if not is_float_dtype(x.dtype):
        raise DTypeError(
            with_location(f"{op}: {what} must be floating point, got {x.dtype}; use x.float()")
        )
    return float32_inputs(x)[0]  # autocast: losses are on PyTorch's float32 list


def _same_shape(op: str, a: Any, b: Any) -> None:
    if tuple(a.shape) != tuple(b.shape):
        raise ShapeError(
            with_location(
                f"{op}: target of shape {tuple(b.shape)} must have the input's shape "
                f"{tuple(a.shape)} (PyTorch would broadcast with a warning; reshape explicitly)"
            )
        )


def _labels(op: str, x: Tensor, target: Any) -> tuple[Tensor, Tensor]:
    """(input, integer target) as (N, C, ...) and (N, ...), unbatched forms lifted."""
    t = as_tensor(target)
    if t.dtype.kind not in "iu":
        raise DTypeError(
            with_location(
                f"{op}: target must hold class indices (integers) for input of shape "
                f"{tuple(x.shape)}, got {t.dtype} of shape {tuple(t.shape)}; use target.long()"
            )
        )
    if x.ndim == 1 and t.ndim == 0:  # unbatched (C,) input
        x, t = x.unsqueeze(0), t.unsqueeze(0)
    want = tuple(x.shape[:1]) + tuple(x.shape[2:])
    if x.ndim < 2 or tuple(t.shape) != want:
        raise ShapeError(
            with_location(
                f"{op}: input of shape {tuple(x.shape)} (N, C, ...) needs a target of shape "
                f"{want if x.ndim >= 2 else '(N,)'}, got {tuple(t.shape)}"
            )
        )
    return x, t


def _picked(op: str, logp: Tensor, t: Tensor, valid: Tensor, ignore_index: int) -> Tensor:
    safe = ops.where(valid, t, 0)
    try:
        return ops.take_along_axis(logp, safe.unsqueeze(1), 1).squeeze(1)
    except ShapeError as exc:
        raise ShapeError(
            f"{op}: target labels must lie in [0, {logp.shape[1]}) or equal ignore_index="
            f"{ignore_index}: {exc}"
        ) from None


def _class_weight(op: str, weight: Any, classes: int) -> Tensor | None:
    if weight is None:
        return None
    w = _float(op, weight, "weight")
    if tuple(w.shape) != (classes,):
        raise ShapeError(
            with_location(f"{op}: weight must have shape ({classes},), got {tuple(w.shape)}")
        )
    return w


def _nll(op: str, logp: Tensor, t: Tensor, weight: Any, ignore_index: int, mode: str) -> Tensor:
    w = _class_weight(op, weight, logp.shape[1])
    valid = ops.not_equal(t, ignore_index)
    picked = _picked(op, logp, t, valid, ignore_index)
    scale = ops.cast(valid, logp.dtype)
    if w is not None:
        scale = scale * ops.getitem(w, ops.where(valid, t, 0))
    loss = -picked * scale
    if mode == "none":
        return loss
    total = loss.sum()
    return total if mode == "sum" else total / scale.sum()


def nll_loss(
    input: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of log-probabilities ``input`` (N, C, ...) at integer ``target``;
    ``mean`` divides by the summed weights of the targets not ignored.

    Example:
        >>> import numpy as np
        >>> logp = as_tensor(np.log(np.array([[0.5, 0.5], [0.25, 0.75]], np.float32)))
        >>> round(nll_loss(logp, as_tensor([0, 1])).item(), 4)
        0.4904
    """
    mode = reduction_mode("nll_loss", size_average, reduce, reduction)
    x, t = _labels("nll_loss", _float("nll_loss", input, "input"), target)
    out = _nll("nll_loss", x, t, weight, int(ignore_index), mode)
    return out.squeeze(0) if mode == "none" and as_tensor(input).ndim == 1 else out


def _smoothing(op: str, logp: Tensor, t: Tensor, w: Any, ignore_index: int, mode: str) -> Tensor:
    """The label-smoothing term of PyTorch's cross_entropy for class-index targets."""
    w = _class_weight(op, w, logp.shape[1])
    valid = ops.not_equal(t, ignore_index)
    spread = (1, -1) + (1,) * (logp.ndim - 2)
    smooth = -(logp if w is None else logp * w.view(spread)).sum(1)
    smooth = smooth * ops.cast(valid, logp.dtype)
    if mode == "none":
        return smooth
    if mode == "sum":
        return smooth.sum()
    if w is None:
        return smooth.sum() / ops.cast(valid, logp.dtype).sum()
    return smooth.sum() / (ops.getitem(w, ops.where(valid, t, 0)) * ops.cast(valid, w.dtype)).sum()


def _soft_targets(op: str, logp: Tensor, t: Tensor, w: Any, smoothing: float, mode: str) -> Any:
    classes = logp.shape[1]
    if smoothing > 0:
        t = t * (1.0 - smoothing) + smoothing / classes
    w = _class_weight(op, w, classes)
    product = logp * t if w is None else logp * t * w.view((1, -1) + (1,) * (logp.ndim - 2))
    loss = -product.sum(1)
    if mode == "mean":
        return loss.sum() / (logp.numel() // classes)
    return _reduce(loss, mode)


def cross_entropy(
    input: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross entropy of logits ``input`` (N, C, ...) and class indices (N, ...) or class
    probabilities (the input's shape), with PyTorch's ``weight``, ``ignore_index``,
    ``label_smoothing`` and ``reduction``.

    Example:
        >>> x = as_tensor([[0.0, 0.0], [5.0, 1.0]])
        >>> round(cross_entropy(x, as_tensor([1, -100])).item(), 4)
        0.6931
        >>> round(cross_entropy(x, as_tensor([[0.5, 0.5], [1.0, 0.0]])).item(), 4)
        0.3556
    """
    op = "cross_entropy"
    mode = reduction_mode(op, size_average, reduce, reduction)
    x = _float(op, input, "input (logits)")
    t = as_tensor(target)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(with_location(f"{op}: label_smoothing must be in [0, 1]"))
    unbatched = x.ndim == 1
    if t.dtype.kind == "f":  # class probabilities
        _same_shape(op, x, t)
        if unbatched:
            x, t = x.unsqueeze(0), t.unsqueeze(0)
        out = _soft_targets(op, ops.log_softmax(x, 1), t, weight, label_smoothing, mode)
        return out.squeeze(0) if unbatched and mode == "none" else out
    x, t = _labels(op, x, t)
    if weight is None and label_smoothing == 0.0:
        out = ops.softmax_cross_entropy(x, t, ignore_label=int(ignore_index), reduce=mode)
    else:
        logp = ops.log_softmax(x, 1)
        out = _nll(op, logp, t, weight, int(ignore_index), mode)
        if label_smoothing > 0.0:
            smooth = _smoothing(op, logp, t, weight, int(ignore_index), mode)
            out = out * (1.0 - label_smoothing) + smooth * (label_smoothing / x.shape[1])
    return out.squeeze(0) if unbatched and mode == "none" else out


def _binary_inputs(op: str, input: Any, target: Any) -> tuple[Tensor, Tensor]:
    x = _float(op, input, "input")
    (t,) = float32_inputs(as_tensor(target))
    if not is_float_dtype(t.dtype):
        raise DTypeError(
            with_location(
                f"{op}: target must be floating point (probabilities in [0, 1]), got "
                f"{t.dtype}; use target.float()"
            )
        )
    _same_shape(op, x, t)
    return x, t


def binary_cross_entropy(
    input: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """``-w * (t log p + (1 - t) log(1 - p))`` of probabilities ``input``; the logs are clamped
    at -100 as in PyTorch.

    Example:
        >>> round(binary_cross_entropy(as_tensor([0.5, 0.9]), as_tensor([1.0, 1.0])).item(), 4)
        0.3993
    """
    op = "binary_cross_entropy"
    mode = reduction_mode(op, size_average, reduce, reduction)
    p, t = _binary_inputs(op, input, target)
    log_p = ops.maximum(ops.log(p), -100.0)
    log_q = ops.maximum(ops.log(1.0 - p), -100.0)
    loss = -(t * log_p + (1.0 - t) * log_q)
    return _reduce(loss if weight is None else loss * weight, mode)


def binary_cross_entropy_with_logits(
    input: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    pos_weight: Any = None,
) -> Tensor:
    """Binary cross entropy of ``sigmoid(input)`` and float targets in [0, 1], stable for large
    logits; ``pos_weight`` scales the positive term per class (broadcast over the last dim).

    Example:
        >>> x, t = as_tensor([0.0, 3.0]), as_tensor([0.25, 1.0])
        >>> round(binary_cross_entropy_with_logits(x, t).item(), 4)
        0.3709
    """
    op = "binary_cross_entropy_with_logits"
    mode = reduction_mode(op, size_average, reduce, reduction)
    x, t = _binary_inputs(op, input, target)
    if weight is None and pos_weight is None:
        return ops.sigmoid_cross_entropy(x, t, reduce="no" if mode == "none" else mode)
    loss = ops.softplus(x) - x * t
    if pos_weight is not None:  # PyTorch: (1 - t) x + (1 + (pw - 1) t) softplus(-x)
        loss = loss + (pos_weight - 1.0) * t * ops.softplus(-x)
    return _reduce(loss if weight is None else loss * weight, mode)


def _pointwise(op: str, input: Any, target: Any, args: tuple) -> tuple[Tensor, Tensor, str]:
    x = _float(op, input, "input")
    (t,) = float32_inputs(as_tensor(target))
    _same_shape(op, x, t)
    return x, t, reduction_mode(op, *args)


def mse_loss(
    input: Any, target: Any, size_average: Any = None, reduce: Any = None, reduction: str = "mean"
) -> Tensor:
    """Squared error ``(input - target) ** 2``, reduced.

    Example:
        >>> mse_loss(as_tensor([1.0, 2.0]), as_tensor([0.0, 4.0])).item()
        2.5
    """
    x, t, mode = _pointwise("mse_loss", input, target, (size_average, reduce, reduction))
    diff = x - t
    return _reduce(diff * diff, mode)


def l1_loss(
    input: Any, target: Any, size_average: Any = None, reduce: Any = None, reduction: str = "mean"
) -> Tensor:
    """Absolute error ``|input - target|``, reduced.

    Example:
        >>> l1_loss(as_tensor([1.0, 2.0]), as_tensor([0.0, 4.0])).item()
        1.5
    """
    x, t, mode = _pointwise("l1_loss", input, target, (size_average, reduce, reduction))
    return _reduce(ops.abs(x - t), mode)


def smooth_l1_loss(
    input: Any,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    beta: float = 1.0,
) -> Tensor:
    """``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (``d = input - target``).

    Example:
        >>> smooth_l1_loss(as_tensor([0.5, 3.0]), as_tensor([0.0, 0.0]), reduction="none").tolist()
        [0.125, 2.5]
    """
    x, t, mode = _pointwise("smooth_l1_loss", input, target, (size_average, reduce, reduction))
    d = ops.abs(x - t)
    if beta == 0.0:
        return _reduce(d, mode)
    return _reduce(ops.where(ops.less(d, beta), 0.5 * d * d / beta, d - 0.5 * beta), mode)


def huber_loss(input: Any, target: Any, reduction: str = "mean", delta: float = 1.0) -> Tensor:
    """``0.5 d^2`` where ``|d| <= delta``, else ``delta (|d| - 0.5 delta)``.

    Example:
        >>> huber_loss(as_tensor([0.5, 3.0]), as_tensor([0.0, 0.0]), reduction="none").tolist()
        [0.125, 2.5]
    """
    x, t, mode = _pointwise("huber_loss", input, target, (None, None, reduction))
    d = ops.abs(x - t)
    return _reduce(
        ops.where(ops.less_equal(d, delta), 0.5 * d * d, delta * (d - 0.5 * delta)), mode
    )


def kl_div(
    input: Any,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    log_target: bool = False,
) -> Tensor:
    """``target * (log target - input)`` for log-probabilities ``input`` (0 where target is 0);
    ``reduction="batchmean"`` divides the sum by the batch size (the true KL divergence).

    Example:
        >>> import numpy as np
        >>> logq = as_tensor(np.log(np.array([[0.5, 0.5]], np.float32)))
        >>> round(kl_div(logq, as_tensor([[0.9, 0.1]]), reduction="batchmean").item(), 4)
        0.3681
    """
    x, t, mode = _pointwise("kl_div", input, target, (size_average, reduce, reduction))
    if log_target:
        loss = ops.exp(t) * (t - x)
    else:
        positive = ops.greater(t, 0)
        entropy = t * ops.log(ops.where(positive, t, 1.0))  # 0 log 0 = 0, with finite gradients
        loss = ops.where(positive, entropy, 0.0) - t * x
    if mode == "batchmean":
        return loss.sum() / (x.shape[0] if x.ndim else 1)
    return _reduce(loss, mode)
