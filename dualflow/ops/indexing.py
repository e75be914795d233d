"""Indexing with integer arrays (``getitem_array`` and its scatter-add ``getitem_array_grad``) and
the public ``getitem``/``getitem_grad``, which pick the basic or the array op for an index.

The index arrays are broadcast and packed into one int64 input of shape ``(k, *bshape)`` (row j
feeds the j-th ``ARRAY`` item of the template), so each op has a fixed number of inputs and an
index tensor computed inside a compiled function is a graph input rather than a constant.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dualflow.device import get_array_module
from dualflow.errors import ShapeError, user_frame, with_location
from dualflow.ops.arithmetic import cast
from dualflow.ops.broadcasting import broadcast_shapes
from dualflow.ops.dispatch import apply
from dualflow.ops.indexspec import (
    ARRAY,
    FULL,
    GetItemError,
    array_axes,
    full_index,
    indexed_shape,
    parse_index,
    shape_of,
)
from dualflow.ops.join import concat
from dualflow.ops.registry import Meta, primitive
from dualflow.ops.shape import broadcast_to, reshape
from dualflow.ops.slicing import GetItem, GetItemGrad
from dualflow.symbolic_containers import as_shape


def _array_shape(op: str, shape: tuple, idx: Meta, index: tuple) -> tuple:
    count = sum(item == ARRAY for item in index) if isinstance(index, tuple) else 0
    kind = getattr(np.dtype(idx.dtype), "kind", "")
    if kind not in "iu" or len(idx.shape) == 0 or idx.shape[0] != count or not count:
        raise ShapeError(
            f"{op}: the packed index must be an integer array of shape (k, ...) with k = "
            f"{count} (the template's arrays), got {tuple(idx.shape)}:{idx.dtype}"
        )
    return indexed_shape(op, tuple(shape), index, tuple(idx.shape[1:]))


def _checked_index(op: str, xp: Any, shape: tuple, idx: Any, index: tuple) -> tuple:
    """The numpy index, after checking every array index against its axis (cupy wraps silently)."""
    idx = xp.asarray(idx)
    if idx.size:
        for row, axis in zip(idx, array_axes(index)):
            low, high = int(row.min()), int(row.max())
            n = shape[axis]
            if low < -n or high >= n:
                bad = high if high >= n else low
                raise GetItemError(
                    with_location(
                        f"{op}: index {bad} is out of bounds for axis {axis} of shape {shape}",
                        user_frame(),
                    )
                )
    return full_index(index, idx)


def _scatter_add(xp: Any, gx: Any, idx: Any, index: tuple, gy: Any) -> None:
    """``gx[index] += gy`` unbuffered: a repeated index adds every time (not the last write)."""
    where = _checked_index("getitem_array_grad", xp, gx.shape, idx, index)
    k = len(idx)  # the number of ARRAY items
    add_at = xp.add.at if hasattr(xp.add, "at") else _cupyx_scatter_add
    if index[:k] == (ARRAY,) * k and all(item == FULL for item in index[k:]):
        # Leading arrays, then whole axes (embedding rows, x[arange, labels]): add.at on flat
        # positions is several times faster than on a multi-dimensional index.
        rows = xp.ravel_multi_index(
            tuple(r.reshape(-1) for r in where[:k]), gx.shape[:k], mode="wrap"
        )  # "wrap" turns the (checked) negative indices into positive ones
        block = math.prod(gx.shape[k:])
        flat = (rows[:, None] * block + xp.arange(block)).reshape(-1) if block != 1 else rows
        add_at(gx.reshape(-1), flat, gy.reshape(-1))
    else:
        add_at(gx, where, gy)


def _cupyx_scatter_add(gx: Any, where: Any, gy: Any) -> None:
    import cupyx  # noqa: PLC0415 - only reachable with cupy, whose old versions lack ufunc.at

    cupyx.scatter_add(gx, where, gy)


@primitive("getitem_array", saves=("x1",), aliasing="fresh")
class GetItemArray:
    """``x[index]`` where the template's ``ARRAY`` items take the rows of the packed ``idx``."""

    def infer(x: Meta, idx: Meta, *, index: tuple) -> tuple[Meta]:
        return (Meta(_array_shape("getitem", x.shape, idx, index), x.dtype),)

    def forward(xp, x, idx, *, index):
        return x[_checked_index("getitem", xp, x.shape, idx, index)]

    def backward(ctx, gy):
        shape, index = ctx.in_shapes[0], ctx.attrs["index"]
        return apply(GetItemArrayGrad, gy, ctx.x1, shape=shape, index=index), None


@primitive("getitem_array_grad", saves=("x1",), aliasing="fresh")
class GetItemArrayGrad:
    """Zeros of ``shape`` with ``gy`` added at ``index``; repeated indices accumulate."""

    def infer(gy: Meta, idx: Meta, *, shape: tuple, index: tuple) -> tuple[Meta]:
        expected = _array_shape("getitem_array_grad", tuple(shape), idx, index)
        if tuple(gy.shape) != expected:
            raise ShapeError(
                f"getitem_array_grad: gy has shape {tuple(gy.shape)} but indexing "
                f"{tuple(shape)} with {index} gives {expected}"
            )
        return (Meta(tuple(shape), gy.dtype),)

    def forward(xp, gy, idx, *, shape, index):
        gx = xp.zeros(shape, gy.dtype)
        _scatter_add(xp, gx, idx, index, gy)
        return gx

    def backward(ctx, ggx):
        return apply(GetItemArray, ggx, ctx.x1, index=ctx.attrs["index"]), None


def _pack(arrays: list) -> Any:
    """Broadcast the index arrays and stack them into one int64 ``(k, *bshape)`` input."""
    shapes = [tuple(a.shape) for a in arrays]
    try:
        bshape = broadcast_shapes(*shapes)
    except ValueError:
        raise GetItemError(
            with_location(
                f"getitem: index arrays of shapes {shapes} do not broadcast", user_frame()
            )
        ) from None
    if any(hasattr(a, "requires_grad") for a in arrays):  # Tensors: pack with ops (traceable)
        rows = [a if a.dtype == np.int64 else cast(a, np.int64) for a in arrays]
        rows = [r if r.shape == bshape else broadcast_to(r, bshape) for r in rows]
        rows = [reshape(r, (1,) + bshape) for r in rows]
        return rows[0] if len(rows) == 1 else concat(rows, axis=0)
    xp = get_array_module(*arrays)
    if len(arrays) == 1:
        return xp.asarray(arrays[0], dtype=np.int64)[None]
    return xp.stack([xp.broadcast_to(xp.asarray(a, dtype=np.int64), bshape) for a in arrays])


def getitem(x: Any, index: Any) -> Any:
    """``x[index]`` with numpy's rules: ints, slices (any step), ``None``, ``...``, integer
    arrays/lists/tensors (advanced indexing; gradients of repeated indices add up) and boolean
    masks (read eagerly: they decide the output shape).

    Example:
        >>> from dualflow import ops
        >>> x = ops.reshape([0.0, 1.0, 2.0, 3.0, 4.0, 5.0], (2, 3))
        >>> ops.getitem(x, (slice(None), None, slice(None, None, -1))).tolist()
        [[[2.0, 1.0, 0.0]], [[5.0, 4.0, 3.0]]]
        >>> ops.getitem(x, ([0, 0, 1], 2)).tolist()
        [2.0, 2.0, 5.0]
    """
    template, arrays = parse_index(index, shape_of(x))
    if not arrays:
        return apply(GetItem, x, index=template)
    return apply(GetItemArray, x, _pack(arrays), index=template)


def getitem_grad(gy: Any, shape: tuple[int, ...], index: Any) -> Any:
    """The adjoint of ``getitem``: zeros of ``shape`` with ``gy`` added at ``index``.

    Example:
        >>> from dualflow import ops
        >>> ops.getitem_grad([1.0, 2.0, 3.0], (2,), [0, 0, 1]).tolist()
        [3.0, 3.0]
    """
    shape = as_shape(shape)
    template, arrays = parse_index(index, shape)
    if not arrays:
        return apply(GetItemGrad, gy, shape=shape, index=template)
    return apply(GetItemArrayGrad, gy, _pack(arrays), shape=shape, index=template)
