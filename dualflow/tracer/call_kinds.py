"""What kind of callable a call in user code runs, for the environment probe (issue 35).

A Python function, class or callable object of user code is followed into its frame; dualflow's
own code is trusted; builtins, ``math``, arithmetic ``operator`` functions and numpy are pure;
clocks, randomness and ``print``/``input``/``open`` are refused; anything else that is handed an
object of the environment, or may read the environment by itself, returns an opaque value.
"""

from __future__ import annotations

import builtins
import datetime
import inspect
import os
import random
import sys
import time
import types
import uuid
from typing import Any

import numpy as np

from dualflow.tracer.provenance import (
    COLLECTION_RESULT,
    ELEMENT_RESULT,
    ENV_COLLECTION,
    OPAQUE,
    TRUSTED,
    UNKNOWN,
    combine,
    is_plain,
    is_plain_callable,
    is_trusted_callable,
    is_trusted_object,
)
from dualflow.tracer.user_code import is_user_file

AWAIT: Any = object()  # the result comes from the callee's return event

MUTATORS = {
    list: frozenset(
        {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "__setitem__"}
    ),
    dict: frozenset({"update", "pop", "popitem", "setdefault", "clear", "__setitem__"}),
    set: frozenset(
        {"add", "discard", "remove", "pop", "clear", "update", "difference_update"}
        | {"intersection_update", "symmetric_difference_update"}
    ),
}
# Mutators whose result depends on what the container held: they read it too.
READ_MUTATORS = frozenset({"pop", "popitem", "setdefault", "remove"})
_CLOCKS = {
    time.time,
    time.time_ns,
    time.perf_counter,
    time.perf_counter_ns,
    time.monotonic,
    time.monotonic_ns,
    time.process_time,
    time.process_time_ns,
    os.urandom,
    os.getrandom if hasattr(os, "getrandom") else os.urandom,
    uuid.uuid1,
    uuid.uuid4,
    datetime.datetime.now,
    datetime.datetime.utcnow,
    datetime.datetime.today,
    datetime.date.today,
}
_IO = {builtins.print: "print()", builtins.input: "input()", builtins.open: "open()"}
_RANDOM_OWNERS = (random.Random, np.random.Generator, np.random.RandomState, np.random.BitGenerator)


def nondeterministic(callee: Any, args: list[Any]) -> str | None:
    """Why calling ``callee`` cannot be baked into a graph (None when it can).

    Example:
        >>> nondeterministic(random.random, []), nondeterministic(len, [])
        ('random.random()', None)
    """
    owner = getattr(callee, "__self__", None)
    name = getattr(callee, "__name__", "?")
    if isinstance(owner, _RANDOM_OWNERS):
        return f"{type(owner).__module__.split('.')[0]}.{name}()"
    try:
        if callee in _CLOCKS:
            return f"{getattr(callee, '__module__', None) or 'time'}.{name}()"
        if callee in _IO:
            return _IO[callee]
    except TypeError:  # unhashable callable
        return None
    if callee is np.random.default_rng and (not args or args[0] is None):
        return "numpy.random.default_rng() without a seed"
    return None


def unnamed_call(probe: Any, line: str) -> None:
    probe.fail(
        "a value this line reads through code the compiler cannot follow (a C function, the "
        "standard library, a property or an unnamed object) is passed to a call; it could "
        "change between calls with no guard to notice, so the function runs eagerly. Read the "
        "value directly (a global, an attribute, a dict item), or pass it as an argument",
        line,
    )


def user_function(callee: Any) -> bool:
    """A Python function (or bound method) of user code: its frame is followed."""
    function = getattr(callee, "__func__", callee)
    if not isinstance(function, types.FunctionType):
        return False
    return is_user_file(function.__code__.co_filename)


LAZY_CODE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def is_lazy(callee: Any) -> bool:
    """A generator (or coroutine) function: calling it runs no frame yet, and what it yields
    later reaches the caller unnamed, so the result is a collection of the environment."""
    code = getattr(getattr(callee, "__func__", callee), "__code__", None)
    return code is not None and bool(code.co_flags & LAZY_CODE)


def user_callable(callee: Any) -> bool:
    """An object whose class's ``__call__`` is user code (not a Module: dualflow's own
    ``__call__`` runs its ``forward``, which the probe follows from there)."""
    if isinstance(callee, type) or is_trusted_object(callee):
        return False
    return user_function(class_call(type(callee)))


def class_call(cls: type) -> Any:
    """The ``__call__`` instances of ``cls`` run (looked up on the class, as Python does)."""
    for klass in cls.__mro__:
        found = klass.__dict__.get("__call__")
        if found is not None:
            return found
    return None


def user_class(callee: Any) -> bool:
    if not isinstance(callee, type):
        return False
    module = sys.modules.get(callee.__module__)
    filename = getattr(module, "__file__", None) or ""
    return bool(filename) and is_user_file(filename)


def constructed(cls: type, args: list[Any]) -> Any:
    """A new instance of a user class: made by the call, unless ``__new__`` may hand back an
    existing object (a singleton of the environment); it holds what it was given."""
    for klass in cls.__mro__[:-1]:
        new = klass.__dict__.get("__new__")
        if new is None or klass.__module__ == "builtins":
            continue
        made_for_tuple = getattr(getattr(new, "__func__", new), "__globals__", {}).get(
            "__name__", ""
        )
        if not str(made_for_tuple).startswith("namedtuple_"):  # namedtuple's is generated
            return OPAQUE
    held = combine(args)
    return ENV_COLLECTION if held is ENV_COLLECTION else UNKNOWN


def classify(probe: Any, callee: Any, args: list[Any], line: str) -> Any:
    """What a call the probe does not follow returns (issue 35: the unknown is safe).

    dualflow's own code is trusted; builtins, ``math`` and arithmetic ``operator`` functions are
    pure (their result names nothing of the environment unless an argument held such objects);
    anything else that is handed an object of the environment, or that may read the
    environment by itself (``os.getenv``, ``copy.deepcopy(cfg)``), returns an opaque value.
    """
    opaque = any(v is OPAQUE for v in args)
    if is_trusted_callable(callee):
        if opaque:
            unnamed_call(probe, line)
        return TRUSTED
    if is_plain_callable(callee):
        unguarded = any(reads_unguarded(probe, v) for v in args)
        return OPAQUE if opaque or unguarded else UNKNOWN
    if callee in COLLECTION_RESULT or callee in ELEMENT_RESULT:
        if opaque:
            return OPAQUE
        worst = combine(args)
        if worst is ENV_COLLECTION:
            return ENV_COLLECTION if callee in COLLECTION_RESULT else OPAQUE
        return worst
    if opaque:
        unnamed_call(probe, line)
        return OPAQUE
    if pure_library(callee) and combine(args) in (UNKNOWN, TRUSTED):
        return UNKNOWN  # numpy and friends on values the call made or read by name
    return OPAQUE


def reads_unguarded(probe: Any, value: Any) -> bool:
    """An object of the environment whose state a builtin reads in C (``float(array)``): not a
    container (their contents are guarded whole) nor an object of a user class (whose
    ``__float__``/``__len__`` runs as followed user code)."""
    if probe.recorder.label_of(value) is None or is_plain(value):
        return False
    if isinstance(value, list | tuple | dict | set | frozenset | types.ModuleType | type):
        return False
    return not user_class(type(value))


def pure_library(callee: Any) -> bool:
    """numpy functions, ufuncs and types, and constructors of builtin containers and values:
    they compute from their arguments only."""
    if isinstance(callee, np.ufunc):
        return True
    module = getattr(callee, "__module__", None) or ""
    if module == "numpy" or module.startswith("numpy."):
        return not module.startswith("numpy.random")
    return isinstance(callee, type) and callee.__module__ == "builtins"


def refuse(probe: Any, why: str, line: str) -> None:
    if why in _IO.values():
        probe.fail(
            f"{why} inside a compiled function would run only while tracing, not at every call; "
            "use dualflow.debug.print(...), which prints on every call, or call it outside",
            line,
        )
    else:
        probe.fail(
            f"{why} inside a compiled function runs only while tracing and its result would be "
            "baked into the graph; use dualflow.random ops or pass the value in as an argument",
            line,
        )
