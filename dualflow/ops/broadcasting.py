"""Broadcasting of shapes whose sizes may be ``SymInt`` expressions (a dynamic-shape trace).

numpy's ``broadcast_shapes`` turns every size into an int (a guard on each size's value); the
written-out rule here compares sizes, so only the relations broadcasting depends on are guarded.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.symbolic_shapes import SymInt


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
    comparison it makes becomes a guard of the trace. Sizes that are the same expression are
    one size, and a literal 1 stretches to the other, before anything is compared with 1:
    ``(s0, 4) + (s0, 4)`` and ``(s0, 4) + (1, 4)`` ask nothing (the result is ``(s0, 4)`` at
    ``s0 == 1`` too), so the trace also holds there; ``(s0, 4) + (4, 4)`` asks ``s0 == 1``."""
    ndim = max((len(s) for s in shapes), default=0)
    result = []
    for axis in range(ndim):
        sizes: list[Any] = []
        for shape in shapes:
            k = len(shape) - ndim + axis
            if k < 0 or (type(shape[k]) is not SymInt and shape[k] == 1):
                continue  # a literal 1 stretches to any size, itself an expression or not
            if not any(_same_size(shape[k], seen) for seen in sizes):
                sizes.append(shape[k])
        size: Any = sizes[0] if len(sizes) == 1 else 1
        for d in sizes if len(sizes) > 1 else ():
            if d == 1:
                continue
            if size == 1:
                size = d
            elif d != size:
                raise ValueError("shapes do not broadcast")
        result.append(size)
    return tuple(result)


def _same_size(a: Any, b: Any) -> bool:
    """Whether two sizes are the same: equal ints, one expression, or two expressions equal at
    the traced sizes (guarded: a batch dimension of two arguments, ``s0 == s1``). An int and an
    expression are never the same here: that comparison is broadcasting's own."""
    if type(a) is SymInt and type(b) is SymInt:
        return a.poly == b.poly or bool(a == b)
    return type(a) is not SymInt and type(b) is not SymInt and a == b
