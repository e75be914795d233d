"""Gathering along one axis: ``take_along_axis`` and its scatter-add adjoint
``take_along_axis_grad`` (primitives, each the other's backward), ``scatter_add`` (a composite),
and ``argsort`` (a stable sort's indices; no gradient).

These carry PyTorch's ``gather``/``scatter_add``/``sort``: ``indices`` has the input's rank and,
off the axis, the input's sizes; its entries must lie in ``[0, n)`` of the axis (no wraparound).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.errors import ShapeError
from dualflow.ops.dispatch import apply
from dualflow.ops.registry import Meta, primitive
from dualflow.ops.validate import check_index_range, require_int
from dualflow.symbolic_containers import as_shape


def _check_indices(op: str, shape: tuple, idx: Meta, axis: int) -> int:
    """The non-negative axis, after checking ``idx`` against an input of ``shape``."""
    require_int(op, idx, "indices")
    ndim = len(shape)
    if not -ndim <= axis < ndim:
        raise ShapeError(f"{op}: axis {axis} is out of range for an input of shape {shape}")
    axis %= ndim
    others = [d for d in range(ndim) if d != axis]
    if len(idx.shape) != ndim or any(idx.shape[d] != shape[d] for d in others):
        raise ShapeError(
            f"{op}: indices of shape {tuple(idx.shape)} must have the rank of the input "
            f"{shape} and its sizes on every axis but {axis}"
        )
    return axis


@primitive("take_along_axis", saves=("x1",), aliasing="fresh")
class TakeAlongAxis:
    """``out[..., j, ...] = x[..., indices[..., j, ...], ...]`` along ``axis`` (torch.gather)."""

    def infer(x: Meta, idx: Meta, *, axis: int) -> tuple[Meta]:
        _check_indices("take_along_axis", tuple(x.shape), idx, axis)
        return (Meta(tuple(idx.shape), x.dtype),)

    def forward(xp, x, idx, *, axis):
        check_index_range("take_along_axis", xp, idx, x.shape[axis], "indices")
        return xp.take_along_axis(x, idx, axis=axis)

    def backward(ctx, gy):
        grad = apply(TakeAlongAxisGrad, gy, ctx.x1, shape=ctx.in_shapes[0], axis=ctx.attrs["axis"])
        return grad, None


@primitive("take_along_axis_grad", saves=("x1",), aliasing="fresh")
class TakeAlongAxisGrad:
    """Zeros of ``shape`` with ``gy`` added at ``indices`` along ``axis``; repeats accumulate."""

    def infer(gy: Meta, idx: Meta, *, shape: tuple, axis: int) -> tuple[Meta]:
        _check_indices("take_along_axis_grad", tuple(shape), idx, axis)
        if tuple(gy.shape) != tuple(idx.shape):
            raise ShapeError(
                f"take_along_axis_grad: gy of shape {tuple(gy.shape)} must match the indices "
                f"{tuple(idx.shape)}"
            )
        return (Meta(tuple(shape), gy.dtype),)

    def forward(xp, gy, idx, *, shape, axis):
        check_index_range("take_along_axis_grad", xp, idx, shape[axis], "indices")
        out = xp.zeros(shape, gy.dtype)
        # Every position of the indices names its full coordinate: the axis entry from idx,
        # the others from its own place (add.at accumulates repeated coordinates).
        where = list(xp.indices(idx.shape, sparse=True))
        where[axis] = idx
        if hasattr(xp.add, "at"):
            xp.add.at(out, tuple(where), gy)
        else:  # older cupy: ufunc.at is missing, cupyx.scatter_add is the same operation
            import cupyx  # noqa: PLC0415 - only reached with cupy

            cupyx.scatter_add(out, tuple(where), gy)
        return out

    def backward(ctx, ggx):
        return apply(TakeAlongAxis, ggx, ctx.x1, axis=ctx.attrs["axis"]), None


@primitive("argsort", aliasing="fresh")
class Argsort:
    """Indices that sort ``x`` along ``axis`` (stable: ties keep their order); no gradient."""

    def infer(x: Meta, *, axis: int, descending: bool) -> tuple[Meta]:
        ndim = len(x.shape)
        if not -ndim <= axis < max(ndim, 1):
            raise ShapeError(f"argsort: axis {axis} is out of range for shape {tuple(x.shape)}")
        return (Meta(tuple(x.shape), np.dtype(np.int64)),)

    def forward(xp, x, *, axis, descending):
        if x.ndim == 0:
            return xp.zeros((), np.int64)
        if descending:  # a stable descending sort: sort the reversed axis, map back, reverse
            n = x.shape[axis]
            order = xp.argsort(xp.flip(x, axis), axis=axis, kind="stable")
            return xp.flip(n - 1 - order, axis).astype(np.int64)
        return xp.argsort(x, axis=axis, kind="stable").astype(np.int64)


def take_along_axis(x: Any, indices: Any, axis: int) -> Any:
    """Pick ``x``'s entries along ``axis`` at ``indices`` (numpy's ``take_along_axis``).

    Example:
        >>> from dualflow import ops
        >>> ops.take_along_axis([[1.0, 2.0], [3.0, 4.0]], [[1, 1], [0, 1]], 1).tolist()
        [[2.0, 2.0], [3.0, 4.0]]
    """
    return apply(TakeAlongAxis, x, indices, axis=int(axis))


def take_along_axis_grad(gy: Any, indices: Any, shape: tuple[int, ...], axis: int) -> Any:
    """The adjoint of ``take_along_axis``: zeros of ``shape`` plus ``gy`` at ``indices``.

    Example:
        >>> from dualflow import ops
        >>> ops.take_along_axis_grad([[1.0, 2.0]], [[1, 1]], (1, 3), 1).tolist()
        [[0.0, 3.0, 0.0]]
    """
    shape = as_shape(shape)
    axis = int(axis) % max(len(shape), 1)
    return apply(TakeAlongAxisGrad, gy, indices, shape=shape, axis=axis)


def scatter_add(x: Any, indices: Any, src: Any, axis: int) -> Any:
    """``x`` plus ``src`` added at ``indices`` along ``axis``; repeated indices accumulate.

    Example:
        >>> from dualflow import ops
        >>> ops.scatter_add([1.0, 1.0, 1.0], [0, 0, 2], [5.0, 6.0, 7.0], 0).tolist()
        [12.0, 1.0, 8.0]
    """
    shape = tuple(x.shape) if hasattr(x, "shape") else np.shape(x)
    return x + take_along_axis_grad(src, indices, shape, axis)


def argsort(x: Any, axis: int = -1, descending: bool = False) -> Any:
    """The indices that sort ``x`` along ``axis`` (stable).

    Example:
        >>> from dualflow import ops
        >>> ops.argsort([3.0, 1.0, 2.0]).tolist(), ops.argsort([1.0, 3.0, 1.0], 0, True).tolist()
        ([1, 2, 0], [1, 0, 2])
    """
    return apply(Argsort, x, axis=int(axis), descending=bool(descending))
