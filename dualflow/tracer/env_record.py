"""What a trace read from and wrote to the Python environment, as the probe reports it.

Reads of places outside the function's arguments become guards (``env_guards``); objects reached
that way are *known*: reads through them are guarded too, and their shallow contents are
snapshotted so that any change the call makes to them is found at the end (a side effect to
replay or to refuse). Places written by ``global``/``nonlocal`` stores are recorded directly.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any

import numpy as np

from dualflow.tensor.core import Tensor
from dualflow.tracer.env_guards import (
    ATTR,
    CELL,
    CONTENT,
    GLOBAL,
    ITEM,
    MISSING,
    Dynamic,
    EnvGuard,
    EnvGuards,
    contents,
    is_value,
    is_versioned,
    read_place,
    same,
    same_contents,
)

_CONTAINERS = (list, dict, set)


@dataclass
class Known:
    """An object of the environment the trace reached, how it is named, what it held."""

    obj: Any
    label: str
    path: tuple  # access path from a root, () when there is none a new process could follow
    snapshot: Any = None  # shallow contents (containers) or a copy of __dict__ (plain objects)


@dataclass
class Change:
    """One place the call changed: ``kind`` as in env_guards, old and new value, the line."""

    kind: str
    holder: Any
    key: Any
    old: Any
    new: Any
    label: str
    line: str | None


def _snapshot(value: Any) -> Any:
    if isinstance(value, _CONTAINERS):
        return contents(value)
    if type(value).__module__.startswith("dualflow."):  # the library's own bookkeeping
        return None  # (communicators, generators): it keeps it right in plans itself
    if isinstance(value, types.ModuleType | type | types.FunctionType | Tensor | np.ndarray):
        return None
    if is_versioned(value):  # Modules and Optimizers: versioned, their writes checked
        return None
    instance = getattr(value, "__dict__", None)
    return dict(instance) if type(instance) is dict else None


def _step(path: tuple, step: tuple) -> tuple:
    return path + (step,) if path else ()


class EnvRecorder:
    """Collects reads (guards), known objects and writes during one tracing run."""

    def __init__(self, on_versioned: Any = None) -> None:
        self.on_versioned = on_versioned  # the tracer's Module/Optimizer hook (versions, rollback)
        self.guards: list[EnvGuard] = []
        self._guarded: set[tuple] = set()
        self._written: set[tuple] = set()  # places this call stored into (reads after: its own)
        self.known: dict[int, Known] = {}
        self.writes: dict[tuple, tuple[Any, str | None]] = {}  # place -> (old value, line)
        self.write_lines: dict[tuple, str] = {}  # (id(holder), key or None) -> first line
        self.arrays: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # env array -> data copy
        self.modules: list[Any] = []  # Modules / Optimizers reached (versions are checked)
        self.tensors: dict[int, Tensor] = {}  # tensors read from the environment
        self.flag_reads: set[int] = set()  # Modules whose `training` the user's code read

    # ----- roots -----------------------------------------------------------------------------
    def add_root(self, obj: Any, label: str, path: tuple) -> None:
        """An object argument of the compiled call: reads through it are guarded."""
        self._observe(obj, label, path)

    def add_defaults(self, function: Any) -> None:
        """A Python function about to run: its default argument values are of the environment
        (``def step(x, model=model)`` reads ``model`` through the default)."""
        target = getattr(function, "__func__", function)
        defaults = list(getattr(target, "__defaults__", None) or ())
        defaults += list((getattr(target, "__kwdefaults__", None) or {}).values())
        name = getattr(target, "__qualname__", "function")
        for value in defaults:
            self._observe(value, f"a default argument of {name}", ())

    def label_of(self, obj: Any) -> Known | None:
        """The known object ``obj`` (None when the trace did not reach it from the outside)."""
        known = self.known.get(id(obj))
        return known if known is not None and known.obj is obj else None

    # ----- reads -----------------------------------------------------------------------------
    def read(
        self, kind: str, holder: Any, key: Any, value: Any, label: str, path: tuple, extra=None
    ) -> None:
        """Guard one read place (the first read of it, unless this call wrote it before)."""
        place = (kind, id(holder), key_id(key))
        if place in self._written or place in self._guarded:
            return  # the call's own write, or read before: the first read is what matters
        self._guarded.add(place)
        self.guards.append(EnvGuard(kind, holder, key, value, label, extra, path))
        self._observe(value, label, path)

    def read_global(self, globals_: dict, builtins: dict, name: str, module: Any) -> Any:
        """Guard a global name (or the builtin it falls back to); returns its value."""
        value = globals_.get(name, MISSING)
        if value is MISSING:
            value = builtins.get(name, MISSING)
        path = (("global", module, name),) if isinstance(module, str) else ()
        self.read(GLOBAL, globals_, name, value, name, path, builtins)
        return value

    def read_attr(self, holder: Any, name: str, value: Any) -> None:
        known = self.label_of(holder)
        if known is not None:
            path = _step(known.path, ("attr", name))
            self.read(ATTR, holder, name, value, f"{known.label}.{name}", path)

    def read_item(self, holder: Any, key: Any, value: Any) -> None:
        known = self.label_of(holder)
        if known is not None:
            json_key = type(key) in (str, int, bool) or key is None
            path = _step(known.path, ("item", key)) if json_key else ()
            self.read(ITEM, holder, key, value, f"{known.label}[{key_label(key)}]", path)

    def read_cell(self, cell: Any, name: str, value: Any, path: tuple) -> None:
        self.read(CELL, cell, None, value, f"closure variable {name}", path)

    def read_contents(self, container: Any) -> None:
        """The call read a container as a whole (iterated it, took its length, searched it)."""
        known = self.label_of(container)
        if known is not None and isinstance(container, list | dict | set | tuple | frozenset):
            if (CONTENT, id(container), None) in self._guarded:
                return
            self.read(CONTENT, container, None, contents(container), known.label, known.path)
            for element in container.values() if isinstance(container, dict) else container:
                self._observe(element, f"an element of {known.label}", ())

    def observe_through(self, holder: Any, suffix: str, step: tuple, value: Any) -> None:
        """A value reached through a versioned holder (a Module's submodule): known, unguarded."""
        known = self.label_of(holder)
        if known is not None:  # its contents are the holder's (optimizer state): not snapshot
            self._observe(value, known.label + suffix, _step(known.path, step), snapshot=False)

    def _observe(self, value: Any, label: str, path: tuple, snapshot: bool = True) -> None:
        if is_value(value) or value is MISSING or id(value) in self.known:
            return
        self.known[id(value)] = Known(value, label, path, _snapshot(value) if snapshot else None)
        if isinstance(value, Tensor):
            self.tensors[id(value)] = value
        elif isinstance(value, np.ndarray):
            self.arrays[id(value)] = (value, value.copy())
        elif is_versioned(value):
            self.modules.append(value)
            if self.on_versioned is not None:
                self.on_versioned(value)

    # ----- writes ----------------------------------------------------------------------------
    def write_to(self, kind: str, holder: Any, key: Any, line: str) -> None:
        """A store into ``holder`` (an attribute or item): recorded when the holder is of the
        environment (known, or a module); stores into objects made by the call are its own."""
        if isinstance(holder, types.ModuleType) or self.label_of(holder) is not None:
            self.write(kind, holder, key, line)

    def write(self, kind: str, holder: Any, key: Any, line: str | None) -> None:
        """A store to a place: globals, cells and module attributes are recorded directly;
        stores into known objects are found by comparing their snapshot at the end."""
        self.write_lines.setdefault((id(holder), key_id(key)), line or "?")
        self.write_lines.setdefault((id(holder), None), line or "?")
        direct = kind in (GLOBAL, CELL) or isinstance(holder, types.ModuleType)
        place = (kind, id(holder), key_id(key))
        if kind != CONTENT:  # a later read of the place sees this call's own value, but a
            self._written.add(place)  # container read after appending still depends on before
        if direct and place not in self.writes:
            try:
                old = read_place(kind, holder, key, {})
            except Dynamic:
                old = MISSING
            self.writes[place] = ((kind, holder, key, old), line)

    def guarded_places(self) -> set[tuple]:
        """``(kind, id(holder), key)`` of every place read (guarded) so far."""
        return self._guarded

    def guards_made(self) -> EnvGuards:
        return EnvGuards(list(self.guards))

    # ----- the end of the call ---------------------------------------------------------------
    def changes(self) -> list[Change]:
        """Every place of the environment this call changed, in a stable order."""
        found: list[Change] = []
        for (kind, holder, key, old), line in self.writes.values():
            new = read_place(kind, holder, key, {})
            if not same(old, new):
                label = key if kind == GLOBAL else f"{getattr(holder, '__name__', '?')}.{key}"
                label = "closure variable" if kind == CELL else label
                found.append(Change(kind, holder, key, old, new, str(label), line))
        for known in self.known.values():
            found += self._changes_of(known)
        return found

    def _changes_of(self, known: Known) -> list[Change]:
        obj, old = known.obj, known.snapshot
        if old is None:
            return []
        line = self.write_lines.get((id(obj), None))
        if isinstance(obj, _CONTAINERS):
            new = contents(obj)
            if same_contents(old, new):
                return []
            return [Change(CONTENT, obj, None, old, new, known.label, line)]
        now = getattr(obj, "__dict__", {})
        changed = []
        for name in sorted(set(old) | set(now)):
            before, after = old.get(name, MISSING), now.get(name, MISSING)
            if before is MISSING:  # an instance attribute shadowing a class default
                before = getattr(type(obj), name, MISSING)
            if not same(before, after):
                where = self.write_lines.get((id(obj), name), line)
                label = f"{known.label}.{name}"
                changed.append(Change(ATTR, obj, name, before, after, label, where))
        return changed

    def arrays_changed(self) -> list[str]:
        """Labels of numpy arrays of the environment the call modified in place."""
        return [
            self.known[i].label
            for i, (array, copy) in self.arrays.items()
            if array.shape != copy.shape or not np.array_equal(array, copy, equal_nan=True)
        ]


def key_id(key: Any) -> Any:
    """A hashable stand-in for a dict key or attribute name (its id when it is unhashable)."""
    try:
        hash(key)
    except TypeError:
        return id(key)
    return (type(key), key)


def key_label(key: Any) -> str:
    """A key as explain prints it, never through a tensor's ``repr`` (a raw read of its array).

    Example:
        >>> key_label("lr"), key_label(3), key_label([1])
        ("'lr'", '3', 'list')
    """
    return repr(key) if is_value(key) else type(key).__name__
