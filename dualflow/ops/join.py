"""Joining and splitting: ``concat`` (a variadic primitive), ``stack`` and ``split`` (composites).

The backward of ``concat`` slices the gradient into one view per input. ``split`` is a tuple of
basic ``getitem`` slices because the registry's ``nout`` is fixed per op while a split's number of
outputs depends on its arguments.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from dualflow.errors import DTypeError, LazyText, ShapeError, user_frame, with_location
from dualflow.ops.axes import normalize_axes
from dualflow.ops.dispatch import apply
from dualflow.ops.indexspec import shape_of
from dualflow.ops.registry import Meta, primitive
from dualflow.ops.shape import expand_dims
from dualflow.ops.slicing import GetItem, axis_slice


def _concat_dtype(metas: tuple[Meta, ...]) -> Any:
    dtypes = [m.dtype for m in metas]
    try:
        return np.result_type(*(np.dtype(d) for d in dtypes))
    except TypeError:
        raise DTypeError(f"concat: inputs of dtypes {dtypes} have no common dtype") from None


@primitive("concat", aliasing="fresh")
class Concat:
    """Join the inputs along an existing ``axis``; the other dimensions must agree."""

    def infer(*xs: Meta, axis: int) -> tuple[Meta]:
        shapes = [tuple(m.shape) for m in xs]
        if not xs:
            raise ShapeError("concat: needs at least one input")
        if any(len(s) != len(shapes[0]) for s in shapes) or not shapes[0]:
            raise ShapeError(f"concat: inputs must have the same rank >= 1, got shapes {shapes}")
        (axis,) = normalize_axes("concat", axis, len(shapes[0]))
        first = shapes[0][:axis] + shapes[0][axis + 1 :]  # compared, not hashed: sizes may be
        if any(s[:axis] + s[axis + 1 :] != first for s in shapes):  # expressions (issue 39)
            raise ShapeError(
                f"concat: along axis {axis} every other dimension must match, got shapes {shapes}"
            )
        out = shapes[0][:axis] + (sum(s[axis] for s in shapes),) + shapes[0][axis + 1 :]
        return (Meta(out, _concat_dtype(xs)),)

    def forward(xp, *xs, axis):
        return xp.concatenate(xs, axis=axis)

    def backward(ctx, gy):
        shapes = ctx.in_shapes
        (axis,) = normalize_axes("concat", ctx.attrs["axis"], len(shapes[0]))
        grads, start = [], 0
        for shape, need in zip(shapes, ctx.needs_input_grad):
            stop = start + shape[axis]
            index = axis_slice(len(shape), axis, start, stop)
            grads.append(apply(GetItem, gy, index=index) if need else None)
            start = stop
        return tuple(grads)


def _canonical_axis(axis: int, ndim: int) -> int:
    """``axis`` made non-negative when in range; otherwise kept, for infer to report."""
    return axis % ndim if ndim and -ndim <= axis < ndim else axis


def concat(xs: Sequence[Any], axis: int = 0) -> Any:
    """Join a sequence of tensors along an existing ``axis`` (numpy's ``concatenate``).

    Example:
        >>> from dualflow import ops
        >>> ops.concat([[[1.0, 2.0]], [[3.0, 4.0], [5.0, 6.0]]], axis=0).shape
        (3, 2)
    """
    xs = tuple(xs)
    ndim = len(shape_of(xs[0])) if xs else 0
    return apply(Concat, *xs, axis=_canonical_axis(int(axis), ndim))


def stack(xs: Sequence[Any], axis: int = 0) -> Any:
    """Join a sequence of same-shaped tensors along a new ``axis`` (numpy's ``stack``).

    Example:
        >>> from dualflow import ops
        >>> ops.stack([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], axis=1).shape
        (2, 3)
    """
    xs = tuple(xs)
    shapes = [shape_of(x) for x in xs]
    if not xs:
        raise ShapeError(with_location("stack: needs at least one input", user_frame()))
    if any(
        s != shapes[0] for s in shapes[1:]
    ):  # compared, not hashed: a symbolic size's hash guards
        raise ShapeError(
            with_location(
                f"stack: along axis {axis} all inputs must have the same shape, got {shapes}",
                user_frame(),
            )
        )
    ndim = len(shapes[0]) + 1
    if not -ndim <= axis < ndim:
        raise ShapeError(
            with_location(
                f"stack: axis {axis} is out of range for inputs of shape {shapes[0]}",
                user_frame(),
            )
        )
    axis %= ndim
    return concat([expand_dims(x, axis) for x in xs], axis=axis)


def _split_bounds(n: int, indices_or_sections: int | Sequence[int], what: str) -> list[int]:
    if isinstance(indices_or_sections, int | np.integer):
        sections = int(indices_or_sections)
        if sections <= 0 or n % sections:
            raise ShapeError(
                with_location(
                    f"split: {what} of length {n} cannot be split into {sections} equal sections; "
                    "pass split indices instead",
                    user_frame(),
                )
            )
        return [n // sections * i for i in range(sections + 1)]
    return [0, *(int(i) for i in indices_or_sections), n]


def split(x: Any, indices_or_sections: int | Sequence[int], axis: int = 0) -> tuple[Any, ...]:
    """Split ``x`` along ``axis`` into equal sections or at the given indices (numpy's ``split``).

    Example:
        >>> from dualflow import ops
        >>> [p.shape for p in ops.split([[1.0, 2.0, 3.0]], [1], axis=1)]
        [(1, 1), (1, 2)]
    """
    shape = shape_of(x)
    try:
        (axis,) = normalize_axes("split", axis, len(shape))
    except ShapeError as exc:
        raise ShapeError(with_location(f"{exc} (shape {shape})", user_frame())) from None
    what = LazyText(lambda: f"axis {axis} of shape {shape}")  # sizes' text only if it fails
    bounds = _split_bounds(shape[axis], indices_or_sections, what)
    # Python slice semantics for each piece, as numpy: out-of-range or decreasing indices give
    # empty or clipped pieces.
    return tuple(
        apply(GetItem, x, index=axis_slice(len(shape), axis, start, stop))
        for start, stop in itertools.pairwise(bounds)
    )
