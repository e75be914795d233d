"""What lazy re-execution's structural key sees of an op call: attribute values and Python
numbers as exact, hashable data, and the inputs' metadata under which ``infer`` results are
remembered (``INFERRED``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow._pending import Pending
from dualflow.graph_ir.layout import array_layout

LITERALS = (int, float, bool, complex)


def _frozen(value: Any) -> Any:
    """An attribute value as something hashable with the same meaning (part of the key)."""
    if isinstance(value, list | tuple):
        return (type(value).__name__, *map(_frozen, value))
    if isinstance(value, dict):
        return ("dict", *((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, slice):
        return ("slice", value.start, value.stop, value.step)
    if isinstance(value, np.ndarray):
        return ("array", value.shape, value.dtype.str, value.tobytes())
    hash(value)  # anything else must be hashable as it is (a TypeError says which one is not)
    return (type(value).__name__, bits(value)) if type(value) in LITERALS else value


def bits(value: Any) -> Any:
    """A Python number as its exact bits: ``0.0 == -0.0`` and ``nan != nan`` would make two
    different programs share a key, or one program never find its own."""
    if type(value) is float:
        return value.hex()
    if type(value) is complex:
        return (value.real.hex(), value.imag.hex())
    return value


def frozen_attrs(attrs: dict[str, Any]) -> tuple:
    """``attrs`` as a hashable tuple (names and values; the op's own order).

    Example:
        >>> frozen_attrs({"axis": [0, 1], "keepdims": False})
        (('axis', ('list', ('int', 0), ('int', 1))), ('keepdims', ('bool', False)))
    """
    return tuple((k, _frozen(v)) for k, v in attrs.items())


# (op, inputs' metadata, attributes) -> (result metas, layout): infer runs once per shape
INFERRED: dict[tuple, tuple] = {}


def described(a: Any) -> Any:
    """What ``infer`` and the layout rule see of an input: shape, dtype, layout class."""
    kind = type(a)
    if kind is Pending:
        if a.real is None:
            return (a.shape, a.dtype, a.layout)
        a = a.real
    elif not hasattr(a, "shape"):
        return kind  # a Python literal: its type
    return (a.shape, a.dtype, array_layout(a))
