"""``softmax_cross_entropy_and_grad``: softmax cross entropy and its gradient in the logits as one
op, so each row's exponentials are made once (the ``loss_with_grad`` pass makes it where a plan
computes both from the same logits and labels).

Its two results are bit for bit ``softmax_cross_entropy``'s and ``softmax_cross_entropy_grad``'s:
on host float32/float64 arrays one kernel (``kernels.loss.cross_entropy.row_losses_and_grads``)
runs the two kernels' operations row by row; elsewhere it is the two ops' own forwards. It is not
differentiable (it exists in optimized plans, after differentiation).
"""

from __future__ import annotations

from typing import Any

from dualflow.ops.dispatch import apply
from dualflow.ops.loss import (
    SoftmaxCrossEntropy,
    SoftmaxCrossEntropyGrad,
    _check_logits,
    _grad_weights,
    _gy_shape,
    _kernels,
    _reduce_mode,
    _reduced,
    _rows,
    _unrows,
)
from dualflow.ops.registry import Meta, primitive
from dualflow.ops.validate import check_index_range


@primitive("softmax_cross_entropy_and_grad", nout=2, autocast="float32", aliasing="fresh")
class SoftmaxCrossEntropyAndGrad:
    """``(softmax_cross_entropy(x, t), softmax_cross_entropy_grad(x, t, gy))`` in one pass."""

    def infer(x: Meta, t: Meta, gy: Meta, *, ignore_label: int, reduce: str) -> tuple[Meta, Meta]:
        dtype = _check_logits("softmax_cross_entropy", x, t)
        _gy_shape(x, t, gy, reduce)
        loss = Meta(tuple(t.shape) if reduce == "no" else (), dtype)
        return loss, Meta(tuple(x.shape), dtype)

    def forward(xp, x, t, gy, *, ignore_label, reduce):
        kernels = _kernels(xp, x, t)
        if kernels is None:  # the two ops' own forwards (cupy, float16, no numba)
            attrs = {"ignore_label": ignore_label, "reduce": reduce}
            loss = SoftmaxCrossEntropy.forward(xp, x, t, **attrs)
            return loss, SoftmaxCrossEntropyGrad.forward(xp, x, t, gy, **attrs)
        labels = t.reshape(-1)
        g = _grad_weights(kernels, labels, gy, ignore_label, reduce)
        losses, count, gx, bad = kernels.row_losses_and_grads(_rows(x), labels, ignore_label, g)
        if bad:  # the loss's own error
            check_index_range("softmax_cross_entropy", xp, t, x.shape[1], "labels", ignore_label)
        return _reduced(losses, count, x, t, reduce), _unrows(gx, x.shape)


def softmax_cross_entropy_and_grad(
    x: Any, labels: Any, gy: Any, ignore_label: int = -1, reduce: str = "mean"
) -> tuple[Any, Any]:
    """``softmax_cross_entropy(x, labels)`` and its gradient in ``x`` for the loss's gradient
    ``gy`` (``softmax_cross_entropy_grad``), computed together; the same bits as the two ops.

    Example:
        >>> from dualflow import ops
        >>> loss, gx = ops.softmax_cross_entropy_and_grad([[0.0, 0.0]], [1], 1.0)
        >>> round(loss.item(), 4), gx.tolist()
        (0.6931, [[0.5, -0.5]])
    """
    mode = _reduce_mode("softmax_cross_entropy_and_grad", reduce)
    attrs = {"ignore_label": int(ignore_label), "reduce": mode}
    return apply(SoftmaxCrossEntropyAndGrad, x, labels, gy, **attrs)
