"""Basic slicing ops: ``getitem`` (ints, slices, new axes), its adjoint ``getitem_grad``, ``flip``.

``getitem`` and ``getitem_grad`` take a canonical template (see ``indexspec``) and are each
other's backward; ``flip`` is its own. Indexing with integer arrays lives in ``indexing``.
"""

from __future__ import annotations

import contextlib
from typing import Any

from dualflow.errors import ShapeError
from dualflow.ops.axes import canonical_axis, normalize_axes
from dualflow.ops.dispatch import apply
from dualflow.ops.indexspec import ARRAY, FULL, basic_index, indexed_shape, shape_of
from dualflow.ops.registry import Meta, primitive


def _basic_shape(op: str, shape: tuple, index: tuple) -> tuple:
    if not isinstance(index, tuple) or ARRAY in index:
        raise ShapeError(f"{op}: index must be a template without arrays, got {index!r}")
    return indexed_shape(op, shape, index)


# numpy checks a basic index itself, so infer runs only to explain a failure (as for reshape).
@primitive("getitem", check_eager=False, aliasing="view")
class GetItem:
    """``x[index]`` for a template of ints, ``None`` and ``(start, stop, step)`` slices (a view)."""

    def infer(x: Meta, *, index: tuple) -> tuple[Meta]:
        return (Meta(_basic_shape("getitem", x.shape, index), x.dtype),)

    def forward(xp, x, *, index):
        return x[basic_index(index)]

    def backward(ctx, gy):
        return apply(GetItemGrad, gy, shape=ctx.in_shapes[0], index=ctx.attrs["index"])


@primitive("getitem_grad", aliasing="fresh")
class GetItemGrad:
    """Zeros of ``shape`` with ``gy`` written at ``index`` (the adjoint of basic ``getitem``)."""

    def infer(gy: Meta, *, shape: tuple, index: tuple) -> tuple[Meta]:
        expected = _basic_shape("getitem_grad", tuple(shape), index)
        if tuple(gy.shape) != expected:
            raise ShapeError(
                f"getitem_grad: gy has shape {tuple(gy.shape)} but indexing {tuple(shape)} "
                f"with {index} gives {expected}"
            )
        return (Meta(tuple(shape), gy.dtype),)

    def forward(xp, gy, *, shape, index):
        gx = xp.zeros(shape, gy.dtype)
        gx[basic_index(index)] = gy  # a basic index never repeats a position
        return gx

    def backward(ctx, ggx):
        return apply(GetItem, ggx, index=ctx.attrs["index"])


def axis_slice(ndim: int, axis: int, start: int | None, stop: int | None, step: int = 1) -> tuple:
    """The template selecting ``start:stop:step`` along ``axis`` of an ``ndim``-D array.

    Example:
        >>> axis_slice(3, 1, 2, 5)
        ((None, None, None), (2, 5, 1), (None, None, None))
    """
    return (FULL,) * axis + ((start, stop, step),) + (FULL,) * (ndim - axis - 1)


@primitive("flip", check_eager=False, aliasing="view")
class Flip:
    """Reverse the order of elements along ``axes`` (a view); its own backward."""

    def infer(x: Meta, *, axes: tuple) -> tuple[Meta]:
        normalize_axes("flip", axes, len(x.shape))
        return (Meta(tuple(x.shape), x.dtype),)

    def forward(xp, x, *, axes):
        return xp.flip(x, axis=axes)

    def backward(ctx, gy):
        return apply(Flip, gy, axes=ctx.attrs["axes"])


def flip(x: Any, axis: int | tuple[int, ...] | None = None) -> Any:
    """Reverse ``x`` along ``axis`` (an int, a tuple of ints, or every axis when None).

    Example:
        >>> from dualflow import ops
        >>> ops.flip([[1.0, 2.0], [3.0, 4.0]], axis=1).tolist()
        [[2.0, 1.0], [4.0, 3.0]]
    """
    ndim = len(shape_of(x))
    axes = tuple(range(ndim)) if axis is None else canonical_axis(axis)
    # One canonical attr (sorted non-negative axes); invalid axes reach infer as given, which
    # raises the ShapeError located at the user's line.
    with contextlib.suppress(ShapeError):
        axes = normalize_axes("flip", axes, ndim)
    return apply(Flip, x, axes=axes)
