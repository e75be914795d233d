"""Softmax and log-softmax along one axis: numerically stable primitives.

Both subtract the maximum before exponentiating, so huge logits neither overflow nor lose the
result; their backward passes reuse the saved output and are written with ops (double backward).
"""

from __future__ import annotations

from typing import Any

from dualflow.errors import ShapeError
from dualflow.ops.arithmetic import exp
from dualflow.ops.dispatch import apply
from dualflow.ops.reduction import sum as reduce_sum
from dualflow.ops.registry import Meta, primitive
from dualflow.ops.validate import require_float


def _softmax_infer(op: str, x: Meta, axis: int) -> tuple[Meta]:
    ndim = len(x.shape)
    if ndim == 0:
        raise ShapeError(f"{op}: input must be at least 1-D, got a scalar")
    if not -ndim <= axis < ndim:
        raise ShapeError(f"{op}: axis {axis} is out of range for input shape {tuple(x.shape)}")
    return (Meta(tuple(x.shape), require_float(op, x)),)


@primitive("softmax", saves=("y",), autocast="float32_cuda", layout="elementwise", aliasing="fresh")
class Softmax:
    """``exp(x) / sum(exp(x))`` along ``axis``."""

    def infer(x: Meta, *, axis: int) -> tuple[Meta]:
        return _softmax_infer("softmax", x, axis)

    def forward(xp, x, *, axis):
        e = x - x.max(axis=axis, keepdims=True)
        xp.exp(e, out=e)
        e /= e.sum(axis=axis, keepdims=True)
        return e

    def backward(ctx, gy):
        y = ctx.y
        return y * (gy - reduce_sum(gy * y, ctx.attrs["axis"], keepdims=True))


@primitive(
    "log_softmax", saves=("y",), autocast="float32_cuda", layout="elementwise", aliasing="fresh"
)
class LogSoftmax:
    """``x - logsumexp(x)`` along ``axis``."""

    def infer(x: Meta, *, axis: int) -> tuple[Meta]:
        return _softmax_infer("log_softmax", x, axis)

    def forward(xp, x, *, axis):
        z = x - x.max(axis=axis, keepdims=True)
        z -= xp.log(xp.exp(z).sum(axis=axis, keepdims=True))
        return z

    def backward(ctx, gy):
        return gy - exp(ctx.y) * reduce_sum(gy, ctx.attrs["axis"], keepdims=True)


def softmax(x: Any, axis: int = -1) -> Any:
    """Softmax along ``axis`` (stable for large inputs).

    Example:
        >>> from dualflow import ops
        >>> [round(v, 4) for v in ops.softmax([0.0, 1e4, 1e4]).tolist()]
        [0.0, 0.5, 0.5]
    """
    return apply(Softmax, x, axis=int(axis))


def log_softmax(x: Any, axis: int = -1) -> Any:
    """Logarithm of the softmax along ``axis`` (stable: no ``log(0)`` for large inputs).

    Example:
        >>> from dualflow import ops
        >>> [round(v, 4) for v in ops.log_softmax([0.0, 0.0]).tolist()]
        [-0.6931, -0.6931]
    """
    return apply(LogSoftmax, x, axis=int(axis))
