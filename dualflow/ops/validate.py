"""Input checks shared by op definitions: dtype kinds, and data-dependent checks in forward.

Each check raises the typed error of DESIGN §9 (``DTypeError``/``ShapeError``) naming the op, what
it got and how to fix it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.dtypes import is_float_dtype
from dualflow.errors import DTypeError, ShapeError, user_frame, with_location
from dualflow.ops.registry import Meta


def meta_of(value: Any) -> Meta:
    """The shape and dtype of an array or tensor, or of a nested list or number as numpy reads
    it: what a public function checks before ``apply``.

    Example:
        >>> meta_of([[1.0, 2.0]]), meta_of(np.zeros(3, np.float32)).shape
        (Meta(shape=(1, 2), dtype=dtype('float64')), (3,))
    """
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return Meta(tuple(value.shape), value.dtype)
    array = np.asarray(value)
    return Meta(array.shape, array.dtype)


def require_float(op: str, meta: Any, what: str = "input") -> np.dtype:
    """The dtype of ``meta`` if it is floating point, else a DTypeError naming ``op``.

    Example:
        >>> from dualflow.ops.registry import Meta
        >>> require_float("softmax", Meta((2,), np.float32))
        dtype('float32')
    """
    dtype = np.dtype(meta.dtype)
    if not is_float_dtype(dtype):
        raise DTypeError(
            f"{op}: {what} must be floating point, got {dtype}; cast it first, "
            f"e.g. ops.cast(x, 'float32')"
        )
    return dtype


def require_int(op: str, meta: Any, what: str = "labels") -> np.dtype:
    """The dtype of ``meta`` if it is an integer dtype, else a DTypeError naming ``op``.

    Example:
        >>> from dualflow.ops.registry import Meta
        >>> require_int("embedding", Meta((2,), np.int32), "ids")
        dtype('int32')
    """
    dtype = np.dtype(meta.dtype)
    if dtype.kind not in "iu":
        raise DTypeError(
            f"{op}: {what} must be integers, got {dtype}; cast them, e.g. ops.cast(t, 'int64')"
        )
    return dtype


def _dtype_of(value: Any) -> np.dtype | None:
    if hasattr(value, "dtype") and not isinstance(value, np.generic):
        return np.dtype(value.dtype)
    return None  # Python scalars and lists: weak, they take the other operand's type


def require_same_float(op: str, a: Any, b: Any, name_a: str, name_b: str) -> None:
    """Raise DTypeError (at the user's line) if ``a`` and ``b`` are arrays/tensors of two
    different floating-point dtypes: PyTorch's layers refuse them rather than upcast.

    Example:
        >>> require_same_float("linear", np.ones(2), np.ones(2, np.float32), "x", "weight")
        ... # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dualflow.errors.DTypeError: linear: x is float64 but weight is float32; cast ...
    """
    da, db = _dtype_of(a), _dtype_of(b)
    if da is None or db is None or da == db or not (is_float_dtype(da) and is_float_dtype(db)):
        return
    raise DTypeError(
        with_location(
            f"{op}: {name_a} is {da} but {name_b} is {db}; cast the {name_a} to match, "
            f"e.g. x.to({db.name!r}) or ops.cast(x, {db.name!r}) (PyTorch raises here too)",
            user_frame(),
        )
    )


def check_index_range(
    op: str, xp: Any, values: Any, bound: int, what: str, skip: Any = None
) -> None:
    """Raise ShapeError if an element of ``values`` lies outside ``[0, bound)``.

    Runs in ``forward`` (the check needs the data); elements equal to ``skip`` are allowed.

    Example:
        >>> check_index_range("one_hot", np, np.array([0, 2]), 3, "labels")
        >>> check_index_range("one_hot", np, np.array([0, 3]), 3, "labels")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dualflow.errors.ShapeError: one_hot: labels must lie in [0, 3), got 3...
    """
    if values.size == 0:
        return
    bad = (values < 0) | (values >= bound)
    if skip is not None:
        bad &= values != skip
    if bool(bad.any()):
        first = values[bad].ravel()[:1].item()
        allowed = f" (or {skip} to ignore)" if skip is not None else ""
        raise ShapeError(
            with_location(
                f"{op}: {what} must lie in [0, {bound}){allowed}, got {first}", user_frame()
            )
        )
