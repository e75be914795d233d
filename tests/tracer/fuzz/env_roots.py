"""The roots of issue 35's grammar of environment access paths: where a step finds the object an
access path starts from, and how a user naturally replaces it between calls.

A root is an expression (in the step's source), a ``place`` that stores the object in a fresh
environment, a ``rebind`` that replaces it there (``None`` where there is no natural way: a
default argument is changed through the object it holds), and the tags of the objects it can
hold (see ``env_steps``; ``None``: any).
"""

from __future__ import annotations

import functools
import os
import types
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.tracer.fuzz import env_helpers as lib
from tests.tracer.fuzz.env_step import WEAK


@dataclass
class Env:
    """The objects one copy of a program reads: its module namespace (the step's globals), the
    closure's rebinding function, the weakref referents kept alive, and the names it set outside
    its namespace (``lib`` attributes, ``os.environ`` keys) to clean up."""

    ns: dict[str, Any]
    tag: str  # unique per program: names outside the namespace
    rebind_cell: Callable[[Any], None] | None = None
    keep: list[Any] = field(default_factory=list)

    @property
    def environ_key(self) -> str:
        """The ``os.environ`` key of this program."""
        return f"DUALFLOW_FUZZENV_{self.tag.upper()}"

    @property
    def lib_name(self) -> str:
        """The attribute of ``env_helpers`` this program's ``other_module`` root uses."""
        return f"CFG_{self.tag}"

    def clean(self) -> None:
        """Remove what this copy set outside its namespace."""
        os.environ.pop(self.environ_key, None)
        if hasattr(lib, self.lib_name):
            delattr(lib, self.lib_name)


@dataclass(frozen=True)
class Root:
    """Where an access path starts (see the module docstring)."""

    name: str
    expr: str  # ``{key}``/``{lib}`` are filled in by the program builder
    place: Callable[[Env, Any], None]
    rebind: Callable[[Env, Any], None] | None
    holds: frozenset[str] | None = None

    def accepts(self, tag: str) -> bool:
        """Whether this root can hold an object of kind ``tag``.

        Example:
            >>> ROOTS["environ"].accepts("str"), ROOTS["environ"].accepts("dict")
            (True, False)
        """
        return self.holds is None or tag in self.holds


def _global(name: str) -> Callable[[Env, Any], None]:
    def place(env: Env, obj: Any) -> None:
        env.ns[name] = obj

    return place


def _module_place(env: Env, obj: Any) -> None:
    module = types.ModuleType("fuzz_settings")
    module.CFG = obj
    env.ns["settings"] = module


def _class_place(env: Env, obj: Any) -> None:
    env.ns["Holder"] = type("Holder", (), {"CFG": obj})


def _weak(env: Env, obj: Any) -> None:
    env.keep.append(obj)
    env.ns["REF"] = weakref.ref(obj)


def _environ(env: Env, obj: Any) -> None:
    os.environ[env.environ_key] = obj


def _closure(env: Env, obj: Any) -> None:
    env.ns["_initial"] = obj  # the factory's argument; ``rebind_cell`` changes the cell later


_ALL = [
    Root("global", "CFG", _global("CFG"), _global("CFG")),
    Root(
        "module_attr",
        "settings.CFG",
        _module_place,
        lambda env, obj: setattr(env.ns["settings"], "CFG", obj),
    ),
    Root(
        "other_module",
        "lib.{lib}",
        lambda env, obj: setattr(lib, env.lib_name, obj),
        lambda env, obj: setattr(lib, env.lib_name, obj),
    ),
    Root(
        "getattr_module",
        "getattr(lib, {lib!r})",
        lambda env, obj: setattr(lib, env.lib_name, obj),
        lambda env, obj: setattr(lib, env.lib_name, obj),
    ),
    Root(
        "import_module",
        "importlib.import_module('tests.tracer.fuzz.env_helpers').{lib}",
        lambda env, obj: setattr(lib, env.lib_name, obj),
        lambda env, obj: setattr(lib, env.lib_name, obj),
    ),
    Root(
        "sys_modules",
        "sys.modules['tests.tracer.fuzz.env_helpers'].{lib}",
        lambda env, obj: setattr(lib, env.lib_name, obj),
        lambda env, obj: setattr(lib, env.lib_name, obj),
    ),
    Root("globals_call", "globals()['CFG']", _global("CFG"), _global("CFG")),
    Root("closure", "cfg", _closure, lambda env, obj: env.rebind_cell(obj)),
    Root(
        "class_attr",
        "Holder.CFG",
        _class_place,
        lambda env, obj: setattr(env.ns["Holder"], "CFG", obj),
    ),
    Root(
        "instance_attr",
        "OBJ.val",
        lambda env, obj: env.ns.__setitem__("OBJ", lib.Box(obj)),
        lambda env, obj: setattr(env.ns["OBJ"], "val", obj),
    ),
    Root(
        "property",
        "OBJ.val",
        lambda env, obj: env.ns.__setitem__("OBJ", lib.Prop(obj)),
        lambda env, obj: setattr(env.ns["OBJ"], "_val", obj),
    ),
    Root("default", "cfg", _global("_initial"), None),
    Root(
        "environ",
        "os.environ.get({key!r}, '0')",
        _environ,
        _environ,
        frozenset({"str"}),
    ),
    Root(
        "environ_item",
        "os.environ[{key!r}]",
        _environ,
        _environ,
        frozenset({"str"}),
    ),
    Root(
        "dict_global",
        "D['cfg']",
        lambda env, obj: env.ns.__setitem__("D", {"cfg": obj}),
        lambda env, obj: env.ns["D"].__setitem__("cfg", obj),
    ),
    Root(
        "list_global",
        "L[0]",
        lambda env, obj: env.ns.__setitem__("L", [obj]),
        lambda env, obj: env.ns["L"].__setitem__(0, obj),
    ),
    Root(
        "tuple_global",
        "T[0]",
        lambda env, obj: env.ns.__setitem__("T", (obj, 0)),
        lambda env, obj: env.ns.__setitem__("T", (obj, 0)),
    ),
    Root("weakref", "REF()", _weak, _weak, WEAK),
    Root(
        "dataclass",
        "DC.val",
        lambda env, obj: env.ns.__setitem__("DC", lib.Conf(obj)),
        lambda env, obj: setattr(env.ns["DC"], "val", obj),
    ),
    Root(
        "partial_keywords",
        "P()",
        lambda env, obj: env.ns.__setitem__("P", functools.partial(lib.keyword, cfg=obj)),
        lambda env, obj: env.ns["P"].keywords.__setitem__("cfg", obj),
    ),
    Root(
        "namespace",
        "NS.cfg",
        lambda env, obj: env.ns.__setitem__("NS", types.SimpleNamespace(cfg=obj)),
        lambda env, obj: setattr(env.ns["NS"], "cfg", obj),
    ),
]
ROOTS: dict[str, Root] = {r.name: r for r in _ALL}
