"""The one explicit state write: ``assign(target, value)`` copies ``value`` into ``target``.

Optimizer updates, batch-norm running statistics and RNG state advance all write through this op,
so a tracer sees every state write as one ``impure`` node it can turn into a graph update.
"""

from __future__ import annotations

from typing import Any

from dualflow.errors import DTypeError, ShapeError
from dualflow.ops.broadcasting import broadcast_shapes
from dualflow.ops.dispatch import apply
from dualflow.ops.registry import Meta, primitive


# returns its target: a view of input 0, with its layout
@primitive("assign", impure=True, state_write=True, aliasing="view", layout="first")
class Assign:
    """Write ``value`` (broadcast, cast to the target dtype) into ``target``; returns target."""

    def infer(target: Meta, value: Meta) -> tuple[Meta]:
        try:
            shape = broadcast_shapes(tuple(target.shape), tuple(value.shape))
        except ValueError:
            shape = None
        if shape != tuple(target.shape):
            raise ShapeError(
                f"assign: value of shape {value.shape} does not fit target {target.shape}"
            )
        if isinstance(target.dtype, type):
            raise DTypeError("assign: the target must be an array or tensor, not a Python scalar")
        return (Meta(tuple(target.shape), target.dtype),)

    def forward(xp, target, value):
        target[...] = value
        return target


def assign(target: Any, value: Any) -> Any:
    """Copy ``value`` into ``target``'s array in place (a recorded state write); returns target.

    Call it under ``no_grad()`` for parameters; the write is not differentiable.

    Example:
        >>> import dualflow
        >>> t = dualflow.tensor([1.0, 2.0])
        >>> _ = assign(t, [5.0, 6.0]); t.tolist()
        [5.0, 6.0]
    """
    if not hasattr(target, "requires_grad"):
        raise DTypeError("assign: the target must be a dualflow Tensor")
    apply(Assign, target, value)
    return target
