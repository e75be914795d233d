"""Broadcasting of shapes whose sizes may be ``SymInt`` expressions (a dynamic-shape trace).

numpy's ``broadcast_shapes`` turns every size into an int (a guard on each size's value); the
written-out rule here compares sizes, so only the relations broadcasting depends on are guarded.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def broadcast_shapes(*shapes: tuple) -> tuple:
    """``np.broadcast_shapes``, also for sizes that are ``SymInt`` expressions (a trace with
    dynamic dimensions); ValueError when the shapes do not broadcast.

    Example:
        >>> broadcast_shapes((2, 1), (3,))
        (2, 3)
    """
    if all(type(d) is int for shape in shapes for d in shape):
        return tuple(np.broadcast_shapes(*shapes))
    return _broadcast_sizes(list(shapes))


def _broadcast_sizes(shapes: list[tuple]) -> tuple:
    """numpy's broadcast written out, for sizes that are ``SymInt`` expressions: each
    comparison it makes becomes a guard of the trace (equal sizes need none)."""
    ndim = max((len(s) for s in shapes), default=0)
    result = []
    for axis in range(ndim):
        size: Any = 1
        for shape in shapes:
            k = len(shape) - ndim + axis
            if k < 0 or shape[k] == 1:
                continue
            if size == 1:
                size = shape[k]
            elif shape[k] != size:
                raise ValueError("shapes do not broadcast")
        result.append(size)
    return tuple(result)
