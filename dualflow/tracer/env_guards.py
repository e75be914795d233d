"""Guards on the Python environment a trace read: globals, closure cells, attributes and items.

Each ``EnvGuard`` names a place a value was read from (a holder and a key) and what was seen
there: immutable values by value, every other object by identity, and containers read as a whole
by their shallow contents. ``EnvGuards.mismatch()`` re-reads every place at a call and names the
first one that changed (the per-call cost of guarding the environment: ~0.1-0.3 µs a guard).
"""

from __future__ import annotations

import math
import types
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "<missing>"})()

GLOBAL, ATTR, ITEM, CELL, CONTENT = "global", "attr", "item", "cell", "content"

_SCALARS = (int, float, complex, bool, str, bytes, type(None), type(Ellipsis), range, slice)


class Dynamic(Exception):
    """Reading the attribute would run user code (a property, ``__getattr__``): not guarded here;
    the code that runs is traced itself."""


def is_value(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is immutable data compared by value (else: by identity).

    Example:
        >>> is_value((1, 2.0, "a")), is_value([1]), is_value(np.float32(2))
        (True, False, True)
    """
    if type(value) in _SCALARS or isinstance(value, np.generic | np.dtype):
        return True
    if type(value) in (tuple, frozenset) and depth < 4:
        return all(is_value(v, depth + 1) for v in value)
    return False


def is_versioned(value: Any) -> bool:
    """Whether ``value`` is a Module or Optimizer (its class sets ``_versioned``): its
    ``_version`` counter changes with every assignment to it, so reads through it are followed,
    not guarded one by one. A package with a ``_version`` submodule (numba's) is not one.

    Example:
        >>> import numba
        >>> from dualflow import nn
        >>> is_versioned(nn.ReLU()), is_versioned(numba), is_versioned(nn.ReLU)
        (True, False, False)
    """
    return getattr(type(value), "_versioned", False) is True


def same(a: Any, b: Any) -> bool:
    """Identity, or equal immutable values of the same type (NaN equals NaN).

    Example:
        >>> same(float("nan"), float("nan")), same(1, 1.0), same(2, 2)
        (True, False, True)
    """
    if a is b:
        return True
    if type(a) is not type(b) or not is_value(a):
        return False
    try:
        equal = bool(a == b)
    except Exception:  # e.g. numpy scalars of odd types: be safe, call them different
        return False
    if equal and isinstance(a, float | np.floating) and a == 0:
        return math.copysign(1.0, a) == math.copysign(1.0, b)  # 0.0 and -0.0 divide apart
    return equal or (a != a and b != b)


def _mro_lookup(cls: type, name: str) -> Any:
    for klass in cls.__mro__:
        found = klass.__dict__.get(name, MISSING)
        if found is not MISSING:
            return found
    return MISSING


def _class_attr(owner: type, name: str) -> Any:
    value = _mro_lookup(owner, name)
    if isinstance(value, staticmethod):
        return value.__func__
    if isinstance(value, property | classmethod) or (
        hasattr(type(value), "__get__") and not isinstance(value, types.FunctionType)
    ):
        if isinstance(value, types.BuiltinFunctionType | types.MethodDescriptorType):
            return value
        raise Dynamic(name)
    return value


def static_attr(obj: Any, name: str) -> Any:
    """What ``obj.name`` reads, without running user code (``MISSING`` when it is absent).

    Methods resolve to the class's function (stable, unlike a bound method); properties and
    classes with ``__getattr__`` raise ``Dynamic``.

    Example:
        >>> static_attr(types.SimpleNamespace(a=1), "a"), static_attr(np, "float32") is np.float32
        (1, True)
    """
    if isinstance(obj, types.ModuleType):
        value = obj.__dict__.get(name, MISSING)
        if value is MISSING and "__getattr__" in obj.__dict__:
            raise Dynamic(name)
        return value
    if isinstance(obj, type):
        return _class_attr(obj, name)
    cls = type(obj)
    if isinstance(_mro_lookup(cls, "__getattribute__"), types.FunctionType):
        raise Dynamic(name)  # a Python __getattribute__ runs on every read
    on_class = _mro_lookup(cls, name)
    if on_class is not MISSING and hasattr(type(on_class), "__set__"):
        if isinstance(on_class, types.MemberDescriptorType | types.GetSetDescriptorType):
            return getattr(obj, name, MISSING)  # __slots__ and C getters: no user code
        raise Dynamic(name)
    instance = getattr(obj, "__dict__", None)
    if instance is not None and name in instance:
        return instance[name]
    if on_class is not MISSING:
        if isinstance(on_class, types.FunctionType | types.BuiltinFunctionType):
            return on_class
        return _class_attr(cls, name)
    tables = instance.get("_modules") if instance is not None else None
    if tables is not None and "_params" in instance:  # a dualflow Module's registered names
        for table in ("_params", "_buffers", "_modules"):
            if name in instance[table]:
                return instance[table][name]
    if _mro_lookup(cls, "__getattr__") is not MISSING:
        raise Dynamic(name)
    return MISSING


def read_item(container: Any, key: Any) -> Any:
    """``container[key]`` for dicts, lists and tuples, or ``MISSING`` (never runs user code).

    Example:
        >>> read_item({"a": 1}, "a"), read_item([1, 2], 5)
        (1, <missing>)
    """
    if isinstance(container, dict):
        try:
            return dict.get(container, key, MISSING)
        except TypeError:  # unhashable key
            return MISSING
    sequence = type(container) in (list, tuple) or _is_namedtuple(container)
    if sequence and type(key) is int:
        return container[key] if -len(container) <= key < len(container) else MISSING
    raise Dynamic(type(key).__name__)  # never repr(key): a tensor's repr reads its array


def _is_namedtuple(value: Any) -> bool:
    """A namedtuple: a tuple subclass whose items are plain tuple items (no user code)."""
    cls = type(value)
    return (
        isinstance(value, tuple) and "_fields" in cls.__dict__ and "__getitem__" not in cls.__dict__
    )


def contents(container: Any) -> tuple:
    """A shallow snapshot of a container (elements kept, compared with ``same``).

    Example:
        >>> contents({"a": 1})
        (('a', 1),)
    """
    if isinstance(container, dict):
        return tuple(dict.items(container))
    if isinstance(container, set | frozenset):
        return tuple(sorted(container, key=id))
    return tuple(container)


def same_contents(old: tuple, new: tuple) -> bool:
    """Whether two ``contents`` snapshots are equal element by element."""
    if len(old) != len(new):
        return False
    for a, b in zip(old, new):
        if type(a) is tuple and type(b) is tuple and len(a) == 2 == len(b):
            if not (same(a[0], b[0]) and same(a[1], b[1])):
                return False
        elif not same(a, b):
            return False
    return True


def read_place(kind: str, holder: Any, key: Any, extra: Any = None) -> Any:
    """The value at a guarded place now (``MISSING`` when it is gone)."""
    if kind == GLOBAL:
        value = holder.get(key, MISSING)
        return extra.get(key, MISSING) if value is MISSING else value
    if kind == ATTR:
        return static_attr(holder, key)
    if kind == ITEM:
        return read_item(holder, key)
    if kind == CELL:
        try:
            return holder.cell_contents
        except ValueError:
            return MISSING
    return contents(holder)


@dataclass(slots=True)
class EnvGuard:
    """One place the trace read, and what it saw there."""

    kind: str
    holder: Any  # globals dict, object, container or cell (kept alive: ids are not reused)
    key: Any
    expect: Any
    label: str  # how explain names the place: "SCALE", "cfg.alpha", "closure w"
    extra: Any = None  # GLOBAL: the builtins dict read when the name is not a global
    path: tuple = ()  # how a new process finds the place (plan cache), () when it cannot

    def holds(self) -> bool:
        try:
            now = read_place(self.kind, self.holder, self.key, self.extra)
        except Dynamic:
            return False
        if self.kind == CONTENT:
            return same_contents(self.expect, now)
        return same(now, self.expect)

    def describe(self) -> str:
        """Why this guard failed, e.g. ``global SCALE: 2.0 -> 5.0``."""
        try:
            now = read_place(self.kind, self.holder, self.key, self.extra)
        except Dynamic:
            now = MISSING
        if self.kind == CONTENT:
            return f"the contents of {self.label} changed"
        if is_value(self.expect) and is_value(now):
            return f"{self.label}: {self.expect!r} -> {now!r}"
        return f"{self.label} is another object now ({_kind(self.expect)} -> {_kind(now)})"


def _kind(value: Any) -> str:
    return "absent" if value is MISSING else type(value).__name__


@dataclass
class EnvGuards:
    """Every environment guard of one trace, in the order the trace made them."""

    entries: list[EnvGuard] = field(default_factory=list)
    _check: Any = field(default=None, repr=False)

    def mismatch(self) -> str | None:
        """The first guard that no longer holds, described; None when all hold.

        Example:
            >>> g = EnvGuards(); box = {"a": 1}
            >>> g.entries.append(EnvGuard(ITEM, box, "a", 1, "box['a']"))
            >>> g.mismatch() is None, box.update(a=2), g.mismatch()
            (True, None, "box['a']: 1 -> 2")
        """
        if self._check is None:
            self._check = compile_checks(self.entries)
        failed = self._check()
        return None if failed < 0 else self.entries[failed].describe()

    def __len__(self) -> int:
        return len(self.entries)


def _safe_read(kind: str, holder: Any, key: Any, extra: Any) -> Any:
    try:
        return read_place(kind, holder, key, extra)
    except Dynamic:
        return MISSING


def _read_line(i: int, guard: EnvGuard, names: dict[str, Any]) -> list[str]:
    """Source lines binding ``v`` to the guard's current value (fast paths where they hold)."""
    names[f"H{i}"], names[f"K{i}"], names[f"X{i}"] = guard.holder, guard.key, guard.extra
    names[f"T{i}"] = guard.kind
    slow = f"v = _read(T{i}, H{i}, K{i}, X{i})"
    holder = guard.holder
    if guard.kind == GLOBAL:
        return [f"v = H{i}.get(K{i}, M)", f"if v is M: v = X{i}.get(K{i}, M)"]
    if guard.kind == ITEM and type(holder) is dict:
        return [f"v = H{i}.get(K{i}, M)"]
    if guard.kind == CELL:
        return ["try:", f"    v = H{i}.cell_contents", "except ValueError:", "    v = M"]
    instance = getattr(holder, "__dict__", None)
    direct = isinstance(holder, types.ModuleType) or (
        type(instance) is dict and guard.key in instance and not isinstance(holder, type)
    )
    if guard.kind == ATTR and direct and not hasattr(type(_mro_lookup(type(holder), guard.key)),
                                                      "__set__"):  # fmt: skip
        names[f"D{i}"] = instance
        return [f"v = D{i}.get(K{i}, M)", f"if v is M: {slow}"]
    return [slow]


def compile_checks(entries: list[EnvGuard]) -> Any:
    """One straight-line function checking every guard: returns the first failing index or -1.

    Only indices appear in the generated source; every holder, key and expected value is passed
    in its namespace (nothing the user named is written into code).
    """
    names: dict[str, Any] = {"M": MISSING, "_same": same, "_read": _safe_read}
    names["_contents"], names["_same_contents"] = contents, same_contents
    lines = ["def check():"]
    for i, guard in enumerate(entries):
        names[f"E{i}"] = guard.expect
        if guard.kind == CONTENT:
            lines.append(f"    if not _same_contents(E{i}, _contents(H{i})): return {i}")
            names[f"H{i}"] = guard.holder
            continue
        lines += ["    " + line for line in _read_line(i, guard, names)]
        if is_value(guard.expect):
            lines.append(f"    if v is not E{i} and not _same(v, E{i}): return {i}")
        else:
            lines.append(f"    if v is not E{i}: return {i}")
    lines.append("    return -1")
    exec(compile("\n".join(lines) + "\n", "<dualflow environment guards>", "exec"), names)
    return names["check"]
