"""Shape ops: reshape, transpose, broadcast_to, sum_to (primitives) and expand_dims, squeeze,
flatten (composites over reshape).

``broadcast_to`` and ``sum_to`` are each other's backward; the engine uses ``sum_to`` to undo
broadcasting once for every op.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dualflow.errors import ShapeError
from dualflow.kernels.norm.channel_sums import channel_sums
from dualflow.ops.axes import normalize_axes
from dualflow.ops.broadcasting import broadcast_shapes
from dualflow.ops.dispatch import apply
from dualflow.ops.registry import Meta, primitive
from dualflow.symbolic_containers import as_shape


def _resolve_shape(op: str, source: tuple[int, ...], shape: tuple[int, ...]) -> tuple:
    size = math.prod(source)
    if shape.count(-1) > 1:
        raise ShapeError(f"{op}: only one dimension may be -1, got {shape}")
    if -1 in shape:
        known = math.prod(d for d in shape if d != -1)
        if known == 0 or size % known:
            raise ShapeError(f"{op}: cannot reshape {source} into {shape}")
        shape = tuple(size // known if d == -1 else d for d in shape)
    if math.prod(shape) != size or any(d < 0 for d in shape):
        raise ShapeError(f"{op}: cannot reshape {source} ({size} elements) into {shape}")
    return shape


# to its input's own shape, numpy returns a view with the input's strides (fold drops it)
@primitive("reshape", check_eager=False, aliasing="view", layout="reshape", passthrough=True)
class Reshape:
    """View the data with a new shape (one dimension may be -1)."""

    def infer(x: Meta, *, shape: tuple) -> tuple[Meta]:
        return (Meta(_resolve_shape("reshape", x.shape, shape), x.dtype),)

    def forward(xp, x, *, shape):
        return xp.reshape(x, shape)

    def backward(ctx, gy):
        return reshape(gy, ctx.in_shapes[0])


@primitive("transpose", check_eager=False, aliasing="view", layout="permute")
class Transpose:
    """Permute axes (reverse them when ``axes`` is None)."""

    def infer(x: Meta, *, axes: tuple | None) -> tuple[Meta]:
        if axes is None:
            return (Meta(x.shape[::-1], x.dtype),)
        if sorted(a % max(len(x.shape), 1) for a in axes) != list(range(len(x.shape))):
            raise ShapeError(f"transpose: axes {axes} are not a permutation for shape {x.shape}")
        return (Meta(tuple(x.shape[a] for a in axes), x.dtype),)

    def forward(xp, x, *, axes):
        return xp.transpose(x, axes)

    def backward(ctx, gy):
        axes = ctx.attrs["axes"]
        if axes is None:
            return transpose(gy)
        ndim = len(axes)
        return transpose(gy, tuple(int(i) for i in np.argsort([a % ndim for a in axes])))


@primitive("broadcast_to", check_eager=False, aliasing="view", layout="broadcast")
class BroadcastTo:
    """Broadcast to ``shape`` with numpy's rules (a read-only view)."""

    def infer(x: Meta, *, shape: tuple) -> tuple[Meta]:
        try:
            out = broadcast_shapes(x.shape, shape)
        except ValueError:
            out = None
        if out != tuple(shape):
            raise ShapeError(f"broadcast_to: cannot broadcast {x.shape} to {shape}")
        return (Meta(tuple(shape), x.dtype),)

    def forward(xp, x, *, shape):
        return xp.broadcast_to(x, shape)

    def backward(ctx, gy):
        return sum_to(gy, ctx.in_shapes[0])


def _sum_to_aliasing(shapes: list[tuple[int, ...]], attrs: dict[str, Any]) -> str:
    """``sum_to`` returns its input itself when there is nothing to sum (the shape is the
    input's), else a new array: a sum (numpy's or ``channel_sums``') or a reshape of one.

    Example:
        >>> [_sum_to_aliasing([(2, 3)], {"shape": s}) for s in ((1, 3), (2, 3))]
        ['fresh', 'view']
    """
    return "view" if tuple(attrs["shape"]) == tuple(shapes[0]) else "fresh"


@primitive("sum_to", check_eager=False, aliasing_rule=_sum_to_aliasing)
class SumTo:
    """Sum over broadcast dimensions so the result has ``shape`` (undoes ``broadcast_to``)."""

    def infer(x: Meta, *, shape: tuple) -> tuple[Meta]:
        try:
            ok = broadcast_shapes(shape, x.shape) == tuple(x.shape)
        except ValueError:
            ok = False
        if not ok:
            raise ShapeError(f"sum_to: {x.shape} cannot be summed to {shape}")
        return (Meta(tuple(shape), x.dtype),)

    def forward(xp, x, *, shape):
        lead = x.ndim - len(shape)
        axes = tuple(range(lead)) + tuple(
            lead + i for i, d in enumerate(shape) if d == 1 and x.shape[lead + i] != 1
        )
        if axes and len(axes) < x.ndim:  # a bias gradient: one pass, split over channels
            summed = channel_sums(x, tuple(k for k in range(x.ndim) if k not in axes))
            if summed is not None:
                return summed.reshape(shape)
        y = x.sum(axis=axes, keepdims=True) if axes else x
        return y.reshape(shape) if lead or y.shape != shape else y

    def backward(ctx, gy):
        return broadcast_to(gy, ctx.in_shapes[0])


def reshape(x: Any, shape: int | tuple[int, ...]) -> Any:
    """Reshape ``x`` (one dimension may be -1).

    Example:
        >>> from dualflow import ops
        >>> ops.reshape([1.0, 2.0, 3.0, 4.0], (2, -1)).shape
        (2, 2)
    """
    shape = as_shape(shape)
    return apply(Reshape, x, shape=shape)


def transpose(x: Any, axes: tuple[int, ...] | None = None) -> Any:
    """Permute the axes of ``x`` (reverse them by default).

    Example:
        >>> from dualflow import ops
        >>> ops.transpose([[1.0, 2.0, 3.0]]).shape
        (3, 1)
    """
    return apply(Transpose, x, axes=None if axes is None else tuple(int(a) for a in axes))


def broadcast_to(x: Any, shape: tuple[int, ...]) -> Any:
    """Broadcast ``x`` to ``shape``.

    Example:
        >>> from dualflow import ops
        >>> ops.broadcast_to([1.0, 2.0], (3, 2)).shape
        (3, 2)
    """
    return apply(BroadcastTo, x, shape=as_shape(shape))


def sum_to(x: Any, shape: tuple[int, ...]) -> Any:
    """Sum ``x`` over the dimensions that broadcasting to its shape from ``shape`` added.

    Example:
        >>> from dualflow import ops
        >>> ops.sum_to([[1.0, 2.0], [3.0, 4.0]], (1, 2)).tolist()
        [[4.0, 6.0]]
    """
    return apply(SumTo, x, shape=as_shape(shape))


def expand_dims(x: Any, axis: int) -> Any:
    """Insert a length-1 axis at ``axis`` (a reshape).

    Example:
        >>> from dualflow import ops
        >>> ops.expand_dims([1.0, 2.0], 0).shape
        (1, 2)
    """
    shape = list(np.shape(x) if not hasattr(x, "shape") else x.shape)
    ndim = len(shape) + 1
    if not -ndim <= axis < ndim:
        raise ShapeError(f"expand_dims: axis {axis} out of range for rank {ndim - 1}")
    shape.insert(axis % ndim, 1)
    return reshape(x, tuple(shape))


def squeeze(x: Any, axis: int | tuple[int, ...] | None = None) -> Any:
    """Remove length-1 axes (all of them, or those in ``axis``) (a reshape).

    Example:
        >>> from dualflow import ops
        >>> ops.squeeze([[1.0], [2.0]]).shape
        (2,)
    """
    shape = tuple(np.shape(x) if not hasattr(x, "shape") else x.shape)
    if axis is None:
        axes = tuple(i for i, d in enumerate(shape) if d == 1)
    else:
        axes = normalize_axes("squeeze", axis, len(shape))
        bad = [a for a in axes if shape[a] != 1]
        if bad:
            raise ShapeError(f"squeeze: axis {bad[0]} of shape {shape} has length {shape[bad[0]]}")
    return reshape(x, tuple(d for i, d in enumerate(shape) if i not in axes))


def flatten(x: Any, start_axis: int = 1) -> Any:
    """Collapse the axes from ``start_axis`` on into one (a reshape).

    Example:
        >>> from dualflow import ops
        >>> ops.flatten([[[1.0, 2.0]], [[3.0, 4.0]]]).shape
        (2, 2)
    """
    shape = tuple(np.shape(x) if not hasattr(x, "shape") else x.shape)
    return reshape(x, shape[:start_axis] + (-1,))
