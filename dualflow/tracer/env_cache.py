"""Environment guards and object fingerprints in the plan cache: stored, and checked on load.

A stored plan is valid in a new process only if every Python value its trace read is the same
there. Each guard is stored as its access path (``global``/``cell``/``self``/``arg`` root, then
attribute and item steps) and what it saw: immutable values as themselves, other objects as a
*description* (module, function, class by qualified name; any other object by its type). Every
Module and Optimizer the trace depended on is stored as a fingerprint: classes of all its
submodules and their non-tensor attributes, or the optimizer's class and hyperparameters.
"""

from __future__ import annotations

import json
import math
import sys
import types
from typing import Any

from dualflow.tensor.core import Tensor
from dualflow.tracer.env_guards import (
    CELL,
    CONTENT,
    GLOBAL,
    MISSING,
    Dynamic,
    EnvGuard,
    EnvGuards,
    is_versioned,
    read_item,
    read_place,
    static_attr,
)
from dualflow.tracer.state_paths import UnreachableState

_MODULE_INTERNALS = frozenset({"_params", "_buffers", "_modules", "_version", "training"})


class NotStorable(Exception):
    """A guard or object that cannot be described for another process."""


def describe(value: Any) -> Any:
    """A JSON-able description of ``value`` that another process can compare.

    Example:
        >>> describe(2.5), describe((1, "a")), describe(math)
        (['float', 2.5], ['tuple', [['int', 1], ['str', 'a']]], ['module', 'math'])
    """
    if value is MISSING:
        return ["missing"]
    if value is None or type(value) in (bool, int, str):
        return [type(value).__name__, value]
    if type(value) is float:
        return ["float", value if math.isfinite(value) else repr(value)]
    if type(value) in (tuple, list) and len(value) <= 64:
        return [type(value).__name__, [describe(v) for v in value]]
    if isinstance(value, types.ModuleType):
        return ["module", value.__name__]
    if isinstance(value, type | types.FunctionType | types.BuiltinFunctionType):
        return ["named", f"{getattr(value, '__module__', '?')}.{value.__qualname__}"]
    if isinstance(value, Tensor):
        return ["tensor"]  # which tensor: the captured state refs bind and check it
    if is_versioned(value):
        return ["versioned", fingerprint(value)]
    if type(value).__module__ == "numpy" or isinstance(value, complex | bytes):
        raise NotStorable(f"a {type(value).__name__} value")
    return ["object", f"{type(value).__module__}.{type(value).__qualname__}"]


def fingerprint(obj: Any) -> Any:
    """What makes two Modules (or Optimizers) compute the same: classes and plain settings.

    Example:
        >>> from dualflow import nn
        >>> fingerprint(nn.LeakyReLU(0.1)) != fingerprint(nn.LeakyReLU(0.2))
        True
    """
    if hasattr(obj, "named_modules"):
        return [
            [name, f"{type(m).__module__}.{type(m).__qualname__}", m.training, _settings(m)]
            for name, m in obj.named_modules()
        ]
    groups = [
        sorted((k, _plain(v)) for k, v in group.items() if k not in ("params", "lr"))
        for group in getattr(obj, "param_groups", ())
    ]
    return [f"{type(obj).__module__}.{type(obj).__qualname__}", groups]


def _settings(module: Any) -> list:
    return sorted((k, _plain(v)) for k, v in vars(module).items() if k not in _MODULE_INTERNALS)


def _plain(value: Any) -> Any:
    try:
        return describe(value)
    except NotStorable:
        return ["object", type(value).__name__]


def canonical(description: Any) -> str:
    """One text per description, however it was stored (JSON turns tuples into lists)."""
    return json.dumps(description, sort_keys=True)


def encode_guards(guards: EnvGuards) -> list[dict[str, Any]]:
    """The stored form of a trace's environment guards; NotStorable when one has no path."""
    records = []
    for guard in guards.entries:
        if not guard.path:
            raise NotStorable(f"{guard.label} is reached in a way another process cannot follow")
        expect = (
            ["contents", [describe(e) for e in guard.expect]]
            if guard.kind == CONTENT
            else describe(guard.expect)
        )
        records.append({"kind": guard.kind, "path": list(guard.path), "expect": expect})
    return records


def decode_guards(records: list[dict[str, Any]], fn: Any, objects: dict[str, Any]) -> EnvGuards:
    """In-process guards from stored records, after checking each against this process.

    Raises:
        UnreachableState: a place is missing here, or holds something else than when stored.
    """
    guards = EnvGuards()
    for record in records:
        kind, path = record["kind"], [tuple(step) for step in record["path"]]
        holder, key, extra = _place(kind, path, fn, objects)
        try:
            value = read_place(kind, holder, key, extra)
        except Dynamic as exc:
            raise UnreachableState(f"{_label(path)} cannot be read here ({exc})") from None
        seen = ["contents", [describe(e) for e in value]] if kind == CONTENT else describe(value)
        if canonical(seen) != canonical(record["expect"]):
            raise UnreachableState(f"{_label(path)} differs from the stored trace")
        guards.entries.append(EnvGuard(kind, holder, key, value, _label(path), extra, tuple(path)))
    return guards


def _place(kind: str, path: list[tuple], fn: Any, objects: dict[str, Any]) -> tuple:
    """(holder, key, extra) of a guard's place in this process."""
    root = path[0]
    if kind == GLOBAL:
        module = sys.modules.get(root[1])
        if module is None or len(path) != 1:
            raise UnreachableState(f"module {root[1]} is not loaded here")
        return vars(module), root[2], vars(sys.modules["builtins"])
    if kind == CELL:
        target = getattr(fn, "__func__", fn)
        code = getattr(target, "__code__", None)
        if code is None or root[1] not in code.co_freevars:
            raise UnreachableState(f"closure variable {root[1]} is not there here")
        return target.__closure__[code.co_freevars.index(root[1])], None, None
    if kind == CONTENT:
        return _follow(path, fn, objects), None, None
    return _follow(path[:-1], fn, objects), path[-1][1], None


def _follow(path: list[tuple], fn: Any, objects: dict[str, Any]) -> Any:
    obj = _root(path[0], fn, objects)
    for kind, key in path[1:]:
        try:
            obj = static_attr(obj, key) if kind == "attr" else read_item(obj, key)
        except Dynamic:
            obj = MISSING
        if obj is MISSING:
            raise UnreachableState(f"{_label(path)} is not there here")
    return obj


def _root(root: tuple, fn: Any, objects: dict[str, Any]) -> Any:
    if root[0] == "global":
        module = sys.modules.get(root[1])
        value = vars(module).get(root[2], MISSING) if module is not None else MISSING
    elif root[0] == "cell":
        value = _cell_value(fn, root[1])
    elif root[0] == "self":
        value = getattr(fn, "__self__", None) or fn
    else:
        value = objects.get(root[1], MISSING)
    if value is MISSING:
        raise UnreachableState(f"{root} is not visible here")
    return value


def _cell_value(fn: Any, name: str) -> Any:
    target = getattr(fn, "__func__", fn)
    code = getattr(target, "__code__", None)
    if code is None or name not in code.co_freevars:
        return MISSING
    try:
        return target.__closure__[code.co_freevars.index(name)].cell_contents
    except ValueError:
        return MISSING


def _label(path: list[tuple]) -> str:
    root = path[0]
    text = {"global": lambda: root[2], "cell": lambda: f"closure {root[1]}"}.get(
        root[0], lambda: str(root[-1])
    )()
    for kind, key in path[1:]:
        text += f".{key}" if kind == "attr" else f"[{key!r}]"
    return text
