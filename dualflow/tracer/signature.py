"""Argument signatures: call arguments as tensor leaves plus a hashable cache key.

``pytree`` walks the containers; this module says what each leaf means for the key. Tensors (and
numpy arrays) become graph inputs keyed by shape, dtype, device and requires-grad; Python scalars
and strings are static and keyed by value; other objects are keyed by identity and reads through
them are guarded. Each leaf carries a readable path (``x.shape[0]``-style messages in ``explain``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from dualflow.tensor.core import Tensor
from dualflow.tracer import pytree

STATIC_TYPES = (int, float, bool, str, bytes, type(None))


@dataclasses.dataclass
class Flat:
    """Flattened arguments: array leaves with paths, the static key, and the structure."""

    leaves: list[Any]
    paths: list[str]
    key: tuple
    described: list[tuple[str, Any]]  # (path, key part) for every leaf, for retrace reasons
    aliases: tuple[int, ...] = ()  # per array leaf: index of the first leaf sharing its array
    objects: list[tuple[Any, str]] = dataclasses.field(default_factory=list)  # (object, path)
    roots: list[str] = dataclasses.field(default_factory=list)  # each argument's name


_DTYPE_NAMES: dict[np.dtype, str] = {}


def _dtype_name(dtype: np.dtype) -> str:
    # numpy computes ``dtype.name`` in Python at every access (~5 us, a third of a warm call)
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = dtype.name
    return name


def describe_leaf(value: Any) -> Any:
    """The cache-key part of one leaf.

    Example:
        >>> describe_leaf(np.zeros((2, 3), np.float32))
        ('array', (2, 3), 'float32')
        >>> describe_leaf(3)
        ('static', 'int', 3)
    """
    if isinstance(value, Tensor):
        array = value.raw_array
        device = "cpu" if type(array) is np.ndarray else str(value.device)
        return ("tensor", array.shape, _dtype_name(array.dtype), device, value.requires_grad)
    if isinstance(value, np.ndarray):
        return ("array", value.shape, _dtype_name(value.dtype))
    if isinstance(value, STATIC_TYPES):
        return ("static", type(value).__name__, value)
    return ("object", type(value).__name__, id(value))


def flatten(args: tuple, kwargs: dict[str, Any], names: list[str]) -> Flat:
    """Flatten call arguments; ``names`` are the positional parameter names (for paths).

    The key holds each argument's ``TreeDef`` (container types, dict keys in insertion order:
    the function may iterate them), the keyword names in call order and every leaf's part.

    Example:
        >>> f = flatten(((np.zeros(2), 3),), {}, ["batch"])
        >>> f.paths, f.described[1]
        (['batch[0]'], ('batch[1]', ('static', 'int', 3)))
    """
    if not args and not kwargs:  # what the walk below gives for no arguments, without it
        return Flat([], [], ((), (), ()), [])
    roots = [(names[i] if i < len(names) else f"args[{i}]", v) for i, v in enumerate(args)]
    roots += kwargs.items()  # call order matters as for dicts (a function may iterate **kwargs)
    # dataclasses with attributes beyond their fields stay whole: objects whose reads are guarded
    values, paths, trees = pytree.flatten_all(roots, opaque=True)
    parts = [describe_leaf(value) for value in values]
    leaves, leaf_paths, objects = [], [], []
    for value, path, part in zip(values, paths, parts):
        if part[0] in ("tensor", "array"):
            leaves.append(value)
            leaf_paths.append(path)
        elif part[0] == "object":  # reads through it are guarded (env_probe roots)
            objects.append((value, path))
    key = (trees, tuple(kwargs), tuple(parts))
    flat = Flat(leaves, leaf_paths, key, list(zip(paths, parts)), objects=objects)
    flat.roots = [name for name, _ in roots]
    flat.aliases = _alias_pattern(flat.leaves)
    return flat


def _alias_pattern(leaves: list[Any]) -> tuple[int, ...]:
    # f(x, x) and f(x, y) must not share a trace: the first would read one input twice.
    first: dict[int, int] = {}
    return tuple(
        first.setdefault(id(leaf.raw_array if isinstance(leaf, Tensor) else leaf), i)
        for i, leaf in enumerate(leaves)
    )


def changed_argument(before: Flat, after: Flat) -> str | None:
    """The first argument path whose container contents differ between two flattenings of the
    same call's arguments (before and after it ran), or None.

    Example:
        >>> d = {"a": 1}
        >>> before = flatten((d,), {}, ["d"])
        >>> d["b"] = 2
        >>> changed_argument(before, flatten((d,), {}, ["d"]))
        "d['b']"
    """
    old, new = before.described, after.described
    for (path, a), (other, b) in zip(old, new):
        if path != other:
            return path
        if a[0] != b[0] or (a[0] in ("static", "object") and a != b):
            return path
    if len(old) != len(new):
        return (old if len(old) > len(new) else new)[min(len(old), len(new))][0]
    for root, x, y in zip(before.roots, before.key[0], after.key[0]):
        if x != y:  # same leaves, other containers (an empty list added, a dict made a list)
            return root
    pairs = zip(before.paths, before.leaves, after.leaves)
    return next((path for path, x, y in pairs if x is not y), None)


def explain_difference(old: list[tuple[str, Any]], new: list[tuple[str, Any]]) -> str:
    """Say which part of the signature changed, e.g. ``x.shape[0]: 32 -> 48``.

    Example:
        >>> a = [("x", ("array", (32, 4), "float32"))]
        >>> b = [("x", ("array", (48, 4), "float32"))]
        >>> explain_difference(a, b)
        'x.shape[0]: 32 -> 48'
    """
    if len(old) != len(new) or [p for p, _ in old] != [p for p, _ in new]:
        return f"argument structure changed: {[p for p, _ in old]} -> {[p for p, _ in new]}"
    for (path, a), (_, b) in zip(old, new):
        if a == b:
            continue
        if a[0] != b[0]:
            return f"{path}: {a[0]} -> {b[0]}"
        if a[0] == "static":
            return f"{path}: {a[2]!r} -> {b[2]!r}"
        if a[1] != b[1]:
            if len(a[1]) != len(b[1]):
                return f"{path}.ndim: {len(a[1])} -> {len(b[1])}"
            dim = next(i for i, (x, y) in enumerate(zip(a[1], b[1])) if x != y)
            return f"{path}.shape[{dim}]: {a[1][dim]} -> {b[1][dim]}"
        labels = ("kind", "shape", "dtype", "device", "requires_grad")
        k = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
        return f"{path}.{labels[k]}: {a[k]} -> {b[k]}"
    return "signature unchanged"
