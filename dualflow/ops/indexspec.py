"""The canonical form of a numpy-style index, and the shape it selects (used by ``getitem``).

An index becomes a plain, hashable *template* with one item per position: an ``int``, ``None``
(a new axis), a ``(start, stop, step)`` tuple (a slice: slices are unhashable before Python 3.12)
or ``ARRAY`` (the next row of the packed integer-index input). Integer arrays travel as op
inputs, never as attrs, so an index tensor computed in a compiled function stays a graph input.
"""

from __future__ import annotations

import functools
import operator
from typing import Any

import numpy as np

from dualflow.errors import DTypeError, ShapeError, user_frame, with_location
from dualflow.ops.dispatch import tracing
from dualflow.symbolic_shapes import SymInt

ARRAY = "array"
FULL = (None, None, None)


class GetItemError(ShapeError, IndexError):
    """An index that does not fit the indexed shape (an IndexError too, so iteration stops)."""


def shape_of(x: Any) -> tuple[int, ...]:
    """The shape of a Tensor, array, list or scalar.

    Example:
        >>> shape_of([[1.0, 2.0]])
        (1, 2)
    """
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def _fail(kind: type[Exception], message: str) -> Exception:
    return kind(with_location(message, user_frame()))


def _bound(value: Any) -> Any:
    if value is None or type(value) is SymInt:  # a bound from a size stays an expression
        return value
    try:
        return operator.index(value)
    except TypeError:
        raise _fail(
            DTypeError, f"getitem: slice bounds must be integers or None, got {value!r}"
        ) from None


def _component(c: Any) -> tuple[str, Any]:
    """Classify one index component as ``(kind, value)``."""
    if c is Ellipsis or c is None:
        return ("ellipsis" if c is Ellipsis else "new"), None
    if isinstance(c, slice):
        item = (_bound(c.start), _bound(c.stop), _bound(c.step))
        if item[2] == 0:
            raise _fail(GetItemError, "getitem: slice step cannot be zero")
        return "slice", item
    if isinstance(c, bool | np.bool_):
        raise _fail(DTypeError, "getitem: boolean scalar indices are not supported; use None")
    if isinstance(c, int | np.integer):
        return "int", int(c)
    if not (hasattr(c, "dtype") and hasattr(c, "shape")):
        if not isinstance(c, list | tuple):
            raise _fail(
                DTypeError,
                f"getitem: unsupported index component {c!r} ({type(c).__name__}); use ints, "
                "slices, None, ..., or integer/boolean arrays",
            )
        c = np.asarray(c)
        c = c.astype(np.int64) if c.size == 0 else c  # numpy reads `x[[]]` as an empty int index
    kind = np.dtype(c.dtype).kind
    if kind == "b":
        if len(c.shape) == 0:
            raise _fail(DTypeError, "getitem: boolean scalar indices are not supported; use None")
        return "mask", c
    if kind not in "iu":
        raise _fail(DTypeError, f"getitem: index arrays must be integer or boolean, got {c.dtype}")
    return "array", c


def _expand(parts: list[tuple[str, Any]], shape: tuple[int, ...]) -> list[tuple[str, Any]]:
    """Replace the Ellipsis (or append at the end) with full slices so every axis is covered."""
    if sum(kind == "ellipsis" for kind, _ in parts) > 1:
        raise _fail(GetItemError, "getitem: an index can only have a single ellipsis (...)")
    consumed = sum(
        len(v.shape) if k == "mask" else int(k in ("int", "slice", "array")) for k, v in parts
    )
    if consumed > len(shape):
        raise _fail(GetItemError, f"getitem: too many indices ({consumed}) for shape {shape}")
    fill = [("slice", FULL)] * (len(shape) - consumed)
    kinds = [kind for kind, _ in parts]
    at = kinds.index("ellipsis") if "ellipsis" in kinds else len(parts)
    return parts[:at] + fill + parts[at + 1 :]


def _mask_rows(mask: Any, shape: tuple[int, ...], axis: int) -> tuple:
    covered = tuple(shape[axis : axis + len(mask.shape)])
    if tuple(mask.shape) != covered:
        raise _fail(
            GetItemError,
            f"getitem: boolean index of shape {tuple(mask.shape)} does not match axes "
            f"{axis}..{axis + len(mask.shape) - 1} of shape {shape}",
        )
    # Data-dependent: the mask's values decide the output shape, so it is read here (under
    # tracing reading a traced mask fails closed, naming what to do) and becomes integer arrays.
    hooks = tracing()
    if hooks is not None and hasattr(mask, "raw_array"):
        hooks.on_raw_access(mask, _MASK_READ)
        return tuple(mask.raw_array.nonzero())
    raw = getattr(mask, "array", mask)
    return tuple(raw.nonzero())


_MASK_READ = (
    "a boolean mask index (x[mask], masked_select: the mask's values decide the result's "
    "length; for a masked loss use ops.where(mask, x, 0).sum() / mask.sum()) reads the values"
)


def parse_index(index: Any, shape: tuple[int, ...]) -> tuple[tuple, list]:
    """Turn a numpy-style index for an array of ``shape`` into ``(template, arrays)``.

    Example:
        >>> parse_index((1, None, slice(None, None, -1)), (3, 4))
        ((1, None, (None, None, -1)), [])
        >>> template, arrays = parse_index([0, 0, 2], (3, 4)); template
        ('array', (None, None, None))
    """
    items = index if isinstance(index, tuple) else (index,)
    parts = _expand([_component(c) for c in items], tuple(shape))
    template: list = []
    arrays: list = []
    axis = 0
    for kind, value in parts:
        if kind == "mask":
            rows = _mask_rows(value, shape, axis)
            template += [ARRAY] * len(value.shape)
            arrays += rows
            axis += len(value.shape)
            continue
        template.append(ARRAY if kind == "array" else value)
        if kind == "array":
            arrays.append(value)
        axis += kind != "new"
    return tuple(template), arrays


@functools.lru_cache(maxsize=4096)
def basic_index(template: tuple) -> tuple:
    """The numpy index of a template without arrays (cached: templates are hashable).

    Example:
        >>> basic_index((0, None, (None, None, -1)))
        (0, None, slice(None, None, -1))
    """
    return tuple(slice(*item) if isinstance(item, tuple) else item for item in template)


def full_index(template: tuple, rows: Any) -> tuple:
    """The numpy index of a template whose ``ARRAY`` items take the rows of ``rows`` in order.

    Example:
        >>> full_index(("array", (1, None, None)), np.array([[0, 2]]))
        (array([0, 2]), slice(1, None, None))
    """
    rows = iter(rows)
    return tuple(
        next(rows) if isinstance(item, str) else slice(*item) if isinstance(item, tuple) else item
        for item in template
    )


def array_axes(template: tuple) -> list[int]:
    """The input axis indexed by each ``ARRAY`` item, in order.

    Example:
        >>> array_axes((None, 0, "array", (None, None, None), "array"))
        [1, 3]
    """
    axes, axis = [], 0
    for item in template:
        if item == ARRAY:
            axes.append(axis)
        axis += item is not None
    return axes


def indexed_shape(op: str, shape: tuple, template: tuple, bshape: tuple | None = None) -> tuple:
    """The shape ``x[index]`` has, numpy's rules; ``bshape`` is the index arrays' shape, if any.

    Example:
        >>> indexed_shape("getitem", (2, 3, 4), (0, (None, None, None), "array"), (5,))
        (5, 3)
    """
    shape = tuple(shape)
    if sum(item is not None for item in template) > len(shape):
        raise GetItemError(f"{op}: too many indices {template} for shape {shape}")
    out: list[int] = []
    advanced: list[int] = []  # template positions of array (and, with arrays, int) items
    first = 0
    axis = 0
    for position, item in enumerate(template):
        if item is None:
            out.append(1)
            continue
        n = shape[axis]
        if isinstance(item, tuple) and len(item) == 3:
            out.append(_slice_length(op, item, n))
        elif (isinstance(item, int) and not isinstance(item, bool)) or item == ARRAY:
            if item != ARRAY and not -n <= item < n:
                raise GetItemError(
                    f"{op}: index {item} is out of bounds for axis {axis} of shape {shape}"
                )
            if bshape is not None:
                first = len(out) if not advanced else first
                advanced.append(position)
        else:
            raise ShapeError(f"{op}: bad index item {item!r} in {template}")
        axis += 1
    out.extend(shape[axis:])
    if bshape is not None:
        # numpy: adjacent advanced indices keep their place, separated ones go to the front.
        adjacent = advanced == list(range(advanced[0], advanced[-1] + 1))
        at = first if adjacent else 0
        out[at:at] = bshape
    return tuple(out)


def _slice_length(op: str, item: tuple, n: int) -> int:
    if (type(n) is SymInt or SymInt in map(type, item)) and _symbolic_slice(item):
        return symbolic_slice_length(item, n)
    try:
        return len(range(*slice(*item).indices(n)))
    except (TypeError, ValueError):
        raise ShapeError(f"{op}: bad slice {item}; use integer bounds and a nonzero step") from None


def _symbolic_slice(item: tuple) -> bool:
    """Whether a slice with a size in it keeps its length an expression: ints or sizes as
    bounds and a positive int step (else ``range``'s int conversion: a guard per value)."""
    step = item[2]
    bounds = all(v is None or type(v) in (int, SymInt) for v in item[:2])
    return bounds and (step is None or (type(step) is int and step > 0))


def symbolic_slice_length(item: tuple, n: Any) -> Any:
    """``len(range(*slice(*item).indices(n)))`` for a positive step, written with comparisons
    a size expression can answer (each one it cannot decide becomes a guard of the trace).

    Example:
        >>> symbolic_slice_length((None, -1, None), 10), symbolic_slice_length((2, 100, 3), 10)
        (9, 3)
    """
    start, stop, step = item
    step = 1 if step is None else step

    def bound(v: Any, default: Any) -> Any:
        if v is None:
            return default
        if v < 0:
            v = v + n
            return v if v > 0 else 0
        return v if v < n else n

    first, last = bound(start, 0), bound(stop, n)
    return (last - first + step - 1) // step if last > first else 0
