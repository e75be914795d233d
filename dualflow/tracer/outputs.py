"""Flatten a traced function's return value into tensor leaves and rebuild it from new arrays.

Non-tensor leaves (Python numbers, strings, None) are kept as they were at trace time; a compiled
call returns the same structure with the plan's arrays in place of the tensors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from dualflow._tensor import Tensor


def flatten_output(obj: Any) -> tuple[list[Tensor], Callable[[list[Any]], Any]]:
    """Tensor leaves of ``obj`` and a function rebuilding ``obj`` from replacement leaves.

    Example:
        >>> import dualflow
        >>> t = dualflow.tensor([1.0])
        >>> leaves, rebuild = flatten_output({"loss": t, "step": 3})
        >>> rebuild(["new"])
        {'loss': 'new', 'step': 3}
    """
    leaves: list[Tensor] = []

    def spec(value: Any) -> Any:
        if isinstance(value, Tensor):
            leaves.append(value)
            return ("leaf", len(leaves) - 1)
        if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
            return ("namedtuple", (type(value), [spec(v) for v in value]))
        if isinstance(value, tuple | list):
            return (type(value), [spec(v) for v in value])
        if isinstance(value, dict):
            return (dict, [(k, spec(v)) for k, v in value.items()])
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = [f.name for f in dataclasses.fields(value) if f.init]
            return ("dataclass", (value, [(n, spec(getattr(value, n))) for n in fields]))
        return ("static", value)

    structure = spec(obj)
    spec = None  # a recursive closure is a reference cycle: break it (garbage per call otherwise)
    return leaves, rebuilder(structure)


def rebuilder(structure: Any) -> Callable[[list[Any]], Any]:
    """The function rebuilding an output of this ``structure`` (kept as ``.structure``).

    Example:
        >>> rebuilder((list, [("leaf", 0), ("static", None)]))(["a"])
        ['a', None]
    """

    def rebuild(new: list[Any]) -> Any:
        return _build(structure, new)

    rebuild.structure = structure  # type: ignore[attr-defined]  # the plan cache stores it
    return rebuild


def _build(node: Any, new: list[Any]) -> Any:
    kind, body = node
    if kind == "leaf":
        return new[body]
    if kind == "static":
        return body
    if kind is dict:
        return {k: _build(v, new) for k, v in body}
    if kind == "namedtuple":
        return body[0](*(_build(v, new) for v in body[1]))
    if kind == "dataclass":
        return dataclasses.replace(body[0], **{n: _build(v, new) for n, v in body[1]})
    return kind(_build(v, new) for v in body)
