"""Padding: ``pad`` with a constant (a primitive whose backward is a slice) and the ``edge`` and
``reflect`` modes (composites: an integer-array ``getitem`` per padded axis, whose scatter-add
backward sums the gradient of every copy of a border element).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.errors import ShapeError, user_frame, with_location
from dualflow.ops.dispatch import apply
from dualflow.ops.indexing import getitem
from dualflow.ops.indexspec import shape_of
from dualflow.ops.registry import Meta, primitive
from dualflow.ops.slicing import GetItem
from dualflow.symbolic_containers import as_size
from dualflow.symbolic_shapes import SymInt

_MODES = ("constant", "edge", "reflect")


def _check_pairs(op: str, pad_width: Any, shape: tuple) -> None:
    ok = isinstance(pad_width, tuple) and len(pad_width) == len(shape)
    ok = ok and all(
        isinstance(p, tuple) and len(p) == 2 and all(isinstance(v, int) and v >= 0 for v in p)
        for p in pad_width
    )
    if not ok:
        raise ShapeError(
            f"{op}: pad_width must be one (before, after) pair of non-negative ints per axis of "
            f"shape {shape}, got {pad_width}"
        )


@primitive("pad", check_eager=False, aliasing="fresh")
class Pad:
    """Pad with the constant ``value``: ``pad_width`` holds one (before, after) pair per axis."""

    def infer(x: Meta, *, pad_width: tuple, value: float) -> tuple[Meta]:
        shape = tuple(x.shape)
        _check_pairs("pad", pad_width, shape)
        return (Meta(tuple(n + b + a for n, (b, a) in zip(shape, pad_width)), x.dtype),)

    def forward(xp, x, *, pad_width, value):
        return xp.pad(x, pad_width, mode="constant", constant_values=value)

    def backward(ctx, gy):
        shape = ctx.in_shapes[0]
        index = tuple((b, b + n, 1) for n, (b, _) in zip(shape, ctx.attrs["pad_width"]))
        return apply(GetItem, gy, index=index)


def _fail(message: str) -> ShapeError:
    return ShapeError(with_location(message, user_frame()))


def _pairs(pad_width: Any, shape: tuple) -> tuple:
    """numpy's pad_width forms (int, (n,), (before, after), per-axis pairs) as per-axis pairs."""
    if _symbolic_pairs(pad_width, shape):  # widths from sizes (a dynamic trace): expressions
        if any(w < 0 for pair in pad_width for w in pair):
            raise _fail(f"pad: pad_width {pad_width!r} has a negative width")
        return tuple((as_size(b), as_size(a)) for b, a in pad_width)
    try:
        widths = np.asarray(pad_width)
        if widths.dtype.kind not in "iu":
            raise TypeError
        pairs = np.broadcast_to(widths, (len(shape), 2))
    except (TypeError, ValueError):
        raise _fail(
            f"pad: pad_width {pad_width!r} must be an int, a (before, after) pair or one pair "
            f"per axis of shape {shape}"
        ) from None
    if (pairs < 0).any():
        raise _fail(f"pad: pad_width {pad_width!r} has a negative width")
    return tuple((int(b), int(a)) for b, a in pairs)


def _symbolic_pairs(pad_width: Any, shape: tuple) -> bool:
    """Whether ``pad_width`` is one (before, after) pair per axis holding a ``SymInt``."""
    if type(pad_width) not in (tuple, list) or len(pad_width) != len(shape):
        return False
    if not all(type(p) in (tuple, list) and len(p) == 2 for p in pad_width):
        return False
    return any(type(w) is SymInt for pair in pad_width for w in pair)


def _source_positions(n: int, before: int, after: int, mode: str) -> np.ndarray:
    """For each position of the padded axis, the input position it copies."""
    positions = np.arange(-before, n + after)
    if mode == "edge":
        return np.clip(positions, 0, n - 1)
    if n == 1:
        return np.zeros_like(positions)
    period = 2 * (n - 1)  # reflect without repeating the edge: 0 1 2 1 0 1 2 ...
    folded = positions % period
    return np.where(folded < n, folded, period - folded)


def pad(x: Any, pad_width: Any, mode: str = "constant", constant_values: float = 0) -> Any:
    """Pad ``x`` like ``numpy.pad`` in modes ``constant``, ``edge`` and ``reflect``.

    Example:
        >>> from dualflow import ops
        >>> ops.pad([1.0, 2.0, 3.0], (1, 2)).tolist()
        [0.0, 1.0, 2.0, 3.0, 0.0, 0.0]
        >>> ops.pad([1.0, 2.0, 3.0], 2, mode="reflect").tolist()
        [3.0, 2.0, 1.0, 2.0, 3.0, 2.0, 1.0]
    """
    shape = shape_of(x)
    pairs = _pairs(pad_width, shape)
    if mode not in _MODES:
        raise ValueError(with_location(f"pad: mode {mode!r} is not one of {_MODES}", user_frame()))
    if mode == "constant":
        if np.ndim(constant_values) != 0:
            raise _fail(f"pad: constant_values must be a scalar, got {constant_values!r}")
        value = constant_values.item() if hasattr(constant_values, "item") else constant_values
        return apply(Pad, x, pad_width=pairs, value=value)
    if not any(before or after for before, after in pairs):
        return apply(Pad, x, pad_width=pairs, value=0)  # a copy, as numpy gives
    for axis, (n, (before, after)) in enumerate(zip(shape, pairs)):
        if before or after:
            if n == 0:
                raise _fail(f"pad: cannot {mode}-pad axis {axis} of shape {shape}: it is empty")
            rows = _source_positions(n, before, after, mode)
            x = getitem(x, (slice(None),) * axis + (rows,))
    return x
