"""Axis arithmetic shared by op definitions: axis normalization and reduced shapes.

Pure functions on tuples; no arrays, so ``infer`` and ``backward`` can both use them.
"""

from __future__ import annotations

from dualflow.errors import ShapeError


def normalize_axes(op: str, axis: int | tuple[int, ...] | None, ndim: int) -> tuple[int, ...]:
    """Turn ``axis`` (None, int or tuple, negatives allowed) into sorted non-negative axes.

    Example:
        >>> normalize_axes("sum", -1, 3)
        (2,)
        >>> normalize_axes("sum", None, 2)
        (0, 1)
    """
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    result = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ShapeError(f"{op}: axis {a} is out of range for an input of rank {ndim}")
        result.append(a % ndim)
    if len(set(result)) != len(result):
        raise ShapeError(f"{op}: repeated axis in {axis}")
    return tuple(sorted(result))


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> tuple:
    """The shape after reducing ``axes`` of ``shape``.

    Example:
        >>> reduced_shape((2, 3, 4), (1,), True)
        (2, 1, 4)
    """
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def canonical_axis(axis: int | tuple[int, ...] | list[int] | None) -> int | tuple | None:
    """Make an ``axis`` argument hashable plain data (lists become tuples).

    Example:
        >>> canonical_axis([0, 1])
        (0, 1)
    """
    if axis is None or isinstance(axis, int):
        return axis
    return tuple(int(a) for a in axis)
