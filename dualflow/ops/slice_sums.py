"""``sum_slice_grads``: the sum of gradients of slices that tile one axis, in one pass.

``passes.slice_grads`` turns a sum of ``getitem_grad``s whose slices tile an axis (the backward of
a packed q/k/v projection's split) into this op. Each input is one piece's gradient, reshaped to
``shapes[k]``, plus 0.0 (what the zeros of the other pieces add: -0.0 becomes +0.0, every other
value stays), written at its place along ``axis``. A piece whose gradient arrives as a reshape of
a strided view (attention's (N*heads, L, hd) gradient transposed to (L, N*heads, hd), reshaped
to (L, N, E)) is read through that view: both it and its place in the output are viewed with the
finest shape that refines both shapes (splitting axes is always a view), so the reshape's copy,
the separate ``+ 0.0`` and the concatenation's copy are one strided addition per piece. The
values are those of the reshape, the addition and the concatenation done one after another.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from dualflow.errors import DTypeError, ShapeError
from dualflow.kernels.fused_cpu import slice_pieces
from dualflow.ops.dispatch import apply
from dualflow.ops.join import Concat
from dualflow.ops.registry import Meta, primitive
from dualflow.ops.shape import Reshape
from dualflow.ops.slicing import GetItem, axis_slice


def refinement(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...] | None:
    """The coarsest shape both ``a`` and ``b`` reshape to by splitting axes only (C order), or
    None when there is none (an axis of one straddles two of the other).

    Example:
        >>> refinement((64, 64, 64), (64, 16, 256)), refinement((4, 6), (6, 4))
        ((64, 16, 4, 64), None)
    """
    if math.prod(a) != math.prod(b) or 0 in a or 0 in b:
        return None
    bounds = sorted({*_strides(a), *_strides(b)})  # element strides of every axis, 1 first
    if any(high % low for low, high in itertools.pairwise(bounds)):
        return None
    return tuple(high // low for low, high in itertools.pairwise(bounds))[::-1]


def _strides(shape: Sequence[int]) -> list[int]:
    # C-order element strides of the axes, and the total: 1, last, last * previous, ...
    out, step = [1], 1
    for extent in reversed(shape):
        step *= extent
        out.append(step)
    return out


def _views(xp: Any, x: Any, shape: tuple, place: Any) -> tuple[Any, Any]:
    """(source, destination) arrays of one piece with one shape: views of ``x`` and of its
    ``place`` in the output where numpy can make them, else ``x`` reshaped (a copy if need be)."""
    if tuple(x.shape) == shape:
        return x, place
    refined = refinement(tuple(x.shape), shape)
    if refined is not None and xp is np and isinstance(x, np.ndarray):
        try:
            return x.reshape(refined, copy=False), place.reshape(refined, copy=False)
        except ValueError:  # the source's strides do not split that way: reshape copies
            pass
    return xp.reshape(x, shape), place


@primitive("sum_slice_grads", aliasing="fresh")
class SumSliceGrads:
    """Input k reshaped to ``shapes[k]`` plus 0.0, the pieces joined along ``axis`` (the sum
    of gradients of slices tiling that axis)."""

    def infer(*xs: Meta, axis: int, shapes: tuple) -> tuple[Meta]:
        if len(xs) != len(shapes):
            raise ShapeError(f"sum_slice_grads: {len(xs)} inputs but {len(shapes)} piece shapes")
        pieces = []
        for x, shape in zip(xs, shapes):
            if np.dtype(x.dtype).kind not in "fc":  # gradients: + 0.0 would change the dtype
                raise DTypeError(f"sum_slice_grads: pieces are gradients, got dtype {x.dtype}")
            if math.prod(x.shape) != math.prod(shape):
                raise ShapeError(
                    f"sum_slice_grads: a piece of shape {tuple(x.shape)} cannot be read as {shape}"
                )
            pieces.append(Meta(tuple(shape), x.dtype))
        return Concat.infer(*pieces, axis=axis)

    def forward(xp, *xs, axis, shapes):
        shape = list(shapes[0])  # ``infer`` checked the pieces when the call was recorded
        shape[axis] = sum(piece[axis] for piece in shapes)
        out = xp.empty(tuple(shape), np.result_type(*(x.dtype for x in xs)))
        start = 0
        for x, shape in zip(xs, shapes):
            stop = start + shape[axis]
            place = out[tuple(slice(*s) for s in axis_slice(len(shape), axis, start, stop))]
            source, target = _views(xp, x, tuple(shape), place)
            if xp is not np or not slice_pieces.add_zero(target, source):
                xp.add(source, 0.0, out=target)  # the zeros the other pieces' gradients add
            start = stop
        return out

    def backward(ctx, gy):
        grads, start = [], 0
        for k, shape in enumerate(ctx.attrs["shapes"]):
            stop = start + shape[ctx.attrs["axis"]]
            if ctx.needs_input_grad[k]:
                index = axis_slice(len(shape), ctx.attrs["axis"], start, stop)
                piece = apply(GetItem, gy, index=index)
                grads.append(apply(Reshape, piece, shape=tuple(ctx.in_shapes[k])))
            else:
                grads.append(None)
            start = stop
        return tuple(grads)


def sum_slice_grads(xs: Sequence[Any], axis: int, shapes: Sequence[Sequence[int]]) -> Any:
    """The pieces ``xs`` (each reshaped to its entry of ``shapes``) plus 0.0, joined along
    ``axis``: what a sum of slice gradients tiling ``axis`` equals (``passes.slice_grads``).

    Example:
        >>> from dualflow import ops
        >>> ops.sum_slice_grads([[-0.0, 1.0], [[2.0]]], 1, [(1, 2), (1, 1)]).tolist()
        [[0.0, 1.0, 2.0]]
    """
    shapes = tuple(tuple(int(d) for d in shape) for shape in shapes)
    return apply(SumSliceGrads, *tuple(xs), axis=int(axis), shapes=shapes)
