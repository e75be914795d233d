"""What a call in user code means to the environment probe.

A call of a Python function is followed into its frame (its return value comes back through the
return event). Calls the probe cannot follow are judged here: methods of known containers read
or change them, ``getattr``/``len``/``sorted``... read their arguments, and calls whose result
differs at every call (Python or numpy randomness, clocks, ``print``/``input``/``open``) fail
closed, because their result or effect would be baked into the graph.
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

from dualflow.tracer.env_guards import (
    ATTR,
    CONTENT,
    MISSING,
    Dynamic,
    is_value,
    read_item,
    static_attr,
)
from dualflow.tracer.provenance import (
    COLLECTION_RESULT,
    ELEMENT_RESULT,
    ENV_COLLECTION,
    OPAQUE,
    TRUSTED,
    UNKNOWN,
    combine,
    elements_plain,
    is_plain,
    is_plain_callable,
    is_trusted_callable,
    is_trusted_object,
)
from dualflow.tracer.stack_model import (
    NULL,
    MadeFunction,
    Method,
    StackModel,
    call_parts,
    is_missing,
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
# Builtins that read their (container) arguments as a whole.
CONTENT_READERS = frozenset(
    {
        builtins.len,
        builtins.iter,
        builtins.list,
        builtins.tuple,
        builtins.sorted,
        builtins.sum,
        builtins.min,
        builtins.max,
        builtins.any,
        builtins.all,
        builtins.enumerate,
        builtins.zip,
        builtins.dict,
        builtins.set,
        builtins.frozenset,
        builtins.reversed,
        builtins.map,
        builtins.filter,
        builtins.repr,
        builtins.str,
        builtins.hash,
        builtins.vars,
        builtins.dir,
    }
)
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


def versioned_read(holder: Any, name: str) -> Any:
    """``holder.name`` of a Module or Optimizer (their reads run no user code)."""
    try:
        return static_attr(holder, name)
    except Dynamic:
        value = getattr(holder, name, MISSING)
        if isinstance(value, types.MethodType):
            return value.__func__
        return value


def versioned_item(holder: Any, key: Any) -> Any:
    """``holder[key]`` of a versioned container (a ModuleList, Sequential)."""
    try:
        return holder[key]
    except Exception:
        return UNKNOWN


def iterated(probe: Any, value: Any, line: str) -> None:
    """``for ... in value`` / ``iter(value)``: reads a container; advancing an iterator of the
    environment (a data iterator, a generator) is a side effect a graph cannot replay."""
    recorder = probe.recorder
    if recorder.label_of(value) is None:
        return
    if hasattr(value, "__next__") or isinstance(value, types.GeneratorType):
        probe.fail(
            f"advancing the iterator {recorder.label_of(value).label} inside a compiled function "
            "cannot be replayed: every call would see the first trace's items. Fetch the batch "
            "outside and pass it as an argument",
            line,
        )
    else:
        recorder.read_contents(value)


def handle_call(probe: Any, frame: Any, model: StackModel, ins: Any) -> None:
    """Pop one call from the model and push what it is known to return."""
    argc = ins.arg or 0
    if ins.name == "CALL_FUNCTION":  # Python 3.10: callable, args
        callee, *args = model.pop(argc + 1)
        bound: Any = NULL
    elif ins.name in ("CALL_KW", "CALL_FUNCTION_KW"):  # the kwnames tuple is on the stack too
        callee, bound, args = call_parts(model, argc + 1)
        args = args[:-1]
    else:
        callee, bound, args = call_parts(model, argc)
    probe._returns.pop(id(frame), None)
    line = f"{frame.f_code.co_filename}:{frame.f_lineno}"
    if bound is not NULL and not isinstance(callee, Method):
        args = [bound, *args]  # a method loaded unbound (3.11: method, self, args)
    _push(model, _meaning(probe, callee, args, line))


def handle_call_ex(probe: Any, frame: Any, model: StackModel, ins: Any) -> None:
    """``f(*args, **kwargs)``: the arguments are one tuple (and dict) the model names by
    provenance only; a Python function of user code is followed, dualflow's own code trusted."""
    _, callee, *packed = model.pop(3 + ((ins.arg or 0) & 1))
    probe._returns.pop(id(frame), None)
    line = f"{frame.f_code.co_filename}:{frame.f_lineno}"
    if isinstance(callee, Method):
        callee = probe.attribute(callee.holder, callee.name)
    for value in packed:  # `*items`, `**options`: their contents become the arguments
        probe.recorder.read_contents(value)
    if any(v is OPAQUE for v in (callee, *packed)):
        unnamed_call(probe, line)
        _push(model, OPAQUE)
    elif isinstance(callee, MadeFunction):
        _push(model, _made_function(probe, callee, False, line))
    elif _user_function(callee):
        probe.recorder.add_defaults(callee)
        _push(model, AWAIT)
    else:
        _push(model, TRUSTED if callee is TRUSTED or is_trusted_callable(callee) else OPAQUE)


def _push(model: StackModel, result: Any) -> None:
    if result is AWAIT:
        model.push(OPAQUE)  # replaced by the callee's return value (OPAQUE if none comes)
        model.awaiting = True
    else:
        model.push(result)


def unnamed_call(probe: Any, line: str) -> None:
    probe.fail(
        "a value this line reads through code the compiler cannot follow (a C function, the "
        "standard library, a property or an unnamed object) is passed to a call; it could "
        "change between calls with no guard to notice, so the function runs eagerly. Read the "
        "value directly (a global, an attribute, a dict item), or pass it as an argument",
        line,
    )


def _user_function(callee: Any) -> bool:
    """A Python function (or bound method) of user code: its frame is followed."""
    function = getattr(callee, "__func__", callee)
    if not isinstance(function, types.FunctionType):
        return False
    return is_user_file(function.__code__.co_filename)


def _meaning(probe: Any, callee: Any, args: list[Any], line: str) -> Any:
    recorder = probe.recorder
    if isinstance(callee, Method):
        return _method(probe, callee, args, line)
    opaque = any(v is OPAQUE for v in args)
    if isinstance(callee, MadeFunction):
        return _made_function(probe, callee, opaque, line)
    if callee is OPAQUE or callee is ENV_COLLECTION or is_missing(callee):
        for value in args:
            recorder.read_contents(value)
        if callee is not UNKNOWN or opaque:
            unnamed_call(probe, line)
        return OPAQUE  # what an unnamed callable does is unknown
    if callee is TRUSTED:
        if opaque:
            unnamed_call(probe, line)
        return TRUSTED
    why = nondeterministic(callee, args)
    if why is not None:
        _refuse(probe, why, line)
        return OPAQUE
    special = _builtin_reader(probe, callee, args, line)
    if special is not _NOT_SPECIAL:
        return special
    if _user_function(callee) or _user_class(callee) or _user_callable(callee):
        if opaque:
            unnamed_call(probe, line)
        recorder.add_defaults(callee)
        if isinstance(callee, type):
            return _constructed(callee, args)
        return ENV_COLLECTION if _lazy(callee) else AWAIT
    for value in args:  # a C function may read its container arguments whole
        recorder.read_contents(value)
    return classify(probe, callee, args, line)


_NOT_SPECIAL: Any = object()
_LAZY_CODE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def _made_function(probe: Any, made: MadeFunction, opaque: bool, line: str) -> Any:
    """Calling a function the call made: a comprehension runs now and returns through its
    frame; a generator expression returns a generator whose frame runs (and yields) later."""
    if opaque:
        unnamed_call(probe, line)
        return OPAQUE
    if not is_user_file(made.code.co_filename):
        return OPAQUE
    return ENV_COLLECTION if made.code.co_flags & _LAZY_CODE else AWAIT


def _lazy(callee: Any) -> bool:
    """A generator (or coroutine) function: calling it runs no frame yet, and what it yields
    later reaches the caller unnamed, so the result is a collection of the environment."""
    code = getattr(getattr(callee, "__func__", callee), "__code__", None)
    return code is not None and bool(code.co_flags & _LAZY_CODE)


def _builtin_reader(probe: Any, callee: Any, args: list[Any], line: str) -> Any:
    """``getattr``/``setattr``/``next``: reads and writes the probe models itself."""
    recorder = probe.recorder
    if callee is builtins.getattr or callee is builtins.hasattr:
        return _getattr(probe, args, callee is builtins.getattr)
    if callee is builtins.setattr or callee is builtins.delattr:
        if any(v is OPAQUE for v in args):
            unnamed_call(probe, line)
        if args and isinstance(args[1] if len(args) > 1 else None, str):
            recorder.write_to(ATTR, args[0], args[1], line)
        return UNKNOWN
    if callee is builtins.type and len(args) == 1:
        return _type_of(probe, args[0])
    if callee is builtins.next:
        if not args:
            return OPAQUE
        iterated(probe, args[0], line)
        source = args[0]
        if source is UNKNOWN or source is TRUSTED:
            return source
        return OPAQUE  # an element of an iterator the model cannot name
    return _NOT_SPECIAL


def _user_callable(callee: Any) -> bool:
    """An object whose class's ``__call__`` is user code (not a Module: dualflow's own
    ``__call__`` runs its ``forward``, which the probe follows from there)."""
    if isinstance(callee, type) or is_trusted_object(callee):
        return False
    return _user_function(_class_call(type(callee)))


def _class_call(cls: type) -> Any:
    """The ``__call__`` instances of ``cls`` run (looked up on the class, as Python does)."""
    for klass in cls.__mro__:
        found = klass.__dict__.get("__call__")
        if found is not None:
            return found
    return None


def _type_of(probe: Any, value: Any) -> Any:
    """``type(obj)``: the class of a named object, known from then on (its attributes are read
    and guarded like any other); of an unnamed one, opaque unless dualflow made it."""
    if value is TRUSTED:
        return TRUSTED
    if any(value is mark for mark in (UNKNOWN, OPAQUE, ENV_COLLECTION)) or is_missing(value):
        return OPAQUE
    cls = type(value)
    known = probe.recorder.label_of(value)
    label = f"type({known.label if known is not None else type(value).__name__})"
    probe.recorder.add_root(cls, label, ())
    return cls


def _user_class(callee: Any) -> bool:
    if not isinstance(callee, type):
        return False
    module = sys.modules.get(callee.__module__)
    filename = getattr(module, "__file__", None) or ""
    return bool(filename) and is_user_file(filename)


def _constructed(cls: type, args: list[Any]) -> Any:
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
        unguarded = any(_reads_unguarded(probe, v) for v in args)
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
    if _pure_library(callee) and combine(args) in (UNKNOWN, TRUSTED):
        return UNKNOWN  # numpy and friends on values the call made or read by name
    return OPAQUE


def _reads_unguarded(probe: Any, value: Any) -> bool:
    """An object of the environment whose state a builtin reads in C (``float(array)``): not a
    container (their contents are guarded whole) nor an object of a user class (whose
    ``__float__``/``__len__`` runs as followed user code)."""
    if probe.recorder.label_of(value) is None or is_plain(value):
        return False
    if isinstance(value, list | tuple | dict | set | frozenset | types.ModuleType | type):
        return False
    return not _user_class(type(value))


def _pure_library(callee: Any) -> bool:
    """numpy functions, ufuncs and types, and constructors of builtin containers and values:
    they compute from their arguments only."""
    if isinstance(callee, np.ufunc):
        return True
    module = getattr(callee, "__module__", None) or ""
    if module == "numpy" or module.startswith("numpy."):
        return not module.startswith("numpy.random")
    return isinstance(callee, type) and callee.__module__ == "builtins"


def _refuse(probe: Any, why: str, line: str) -> None:
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


def _getattr(probe: Any, args: list[Any], wants_value: bool) -> Any:
    if any(v is OPAQUE for v in args):
        return OPAQUE
    if len(args) < 2 or not isinstance(args[1], str):
        for value in args:
            probe.recorder.read_contents(value)
        return OPAQUE if args and probe.recorder.label_of(args[0]) is not None else UNKNOWN
    value = probe.attribute(args[0], args[1])
    if not wants_value:
        return UNKNOWN if value is not OPAQUE else OPAQUE
    if value is MISSING:
        return args[2] if len(args) > 2 else UNKNOWN  # the default (or AttributeError)
    return value


def _method(probe: Any, method: Method, args: list[Any], line: str) -> Any:
    holder, name, recorder = method.holder, method.name, probe.recorder
    opaque = any(v is OPAQUE for v in args)
    if holder is OPAQUE or holder is ENV_COLLECTION:
        if holder is OPAQUE or opaque:
            unnamed_call(probe, line)
        return OPAQUE  # a method of an unnamed object of the environment
    if holder is TRUSTED:
        if opaque:
            unnamed_call(probe, line)
        return TRUSTED
    kind = next((k for k in MUTATORS if isinstance(holder, k)), None)
    if kind is None:
        return _object_method(probe, holder, name, args, line)
    for value in args:
        recorder.read_contents(value)  # extend(other), update(other) read their argument
    if name in MUTATORS[kind]:
        if opaque:
            unnamed_call(probe, line)
        if name in READ_MUTATORS:
            recorder.read_contents(holder)
        recorder.write_to(CONTENT, holder, None, line)
        return _picked(holder) if name in READ_MUTATORS else UNKNOWN
    if name == "get" and kind is dict and args and not is_missing(args[0]):
        if opaque:
            return OPAQUE
        value = probe.item(holder, args[0])
        if value is UNKNOWN and read_item(holder, args[0]) is MISSING:
            return args[1] if len(args) > 1 else None  # the default
        return value
    recorder.read_contents(holder)  # keys(), items(), index(), count(), copy()...
    if opaque:
        return OPAQUE
    if name in ("keys", "values", "items", "copy", "__iter__", "__reversed__"):
        return _picked(holder, ENV_COLLECTION)
    return UNKNOWN if name != "get" else _picked(holder)


def _picked(holder: Any, collection: Any = OPAQUE) -> Any:
    """An element (or a view of the elements) of a container: named by nothing the model has,
    so safe only when every element is a plain value."""
    if is_missing(holder) or elements_plain(holder):
        return UNKNOWN
    return collection


def _object_method(probe: Any, holder: Any, name: str, args: list[Any], line: str) -> Any:
    """A method of any other object: user code is followed, dualflow trusted, a method of
    another object of the environment (``os.environ.get``, ``array.item()``) opaque."""
    target = probe.attribute(holder, name)  # guards the method itself when holder is known
    bound = getattr(holder, name, None) if not is_missing(holder) else None
    why = nondeterministic(bound, args) if bound is not None else None
    if why is not None:
        _refuse(probe, why, line)
        return OPAQUE
    if isinstance(holder, types.ModuleType) and not is_missing(target):
        return _meaning(probe, target, args, line)  # `os.getenv(...)`: a function of a module
    opaque = any(v is OPAQUE for v in args)
    if bound is not None and is_trusted_callable(bound) and not _user_function(bound):
        if opaque:
            unnamed_call(probe, line)
        return TRUSTED  # dualflow's own method (a static or class method too)
    if _user_function(target) or (bound is not None and _user_function(bound)):
        if opaque:
            unnamed_call(probe, line)
        probe.recorder.add_defaults(target)
        return AWAIT
    for value in args:
        probe.recorder.read_contents(value)
    if is_trusted_object(holder) or target is TRUSTED:
        if opaque:
            unnamed_call(probe, line)
        return TRUSTED
    if is_value(holder):  # str.format, tuple.index...: plain results
        return OPAQUE if opaque else UNKNOWN
    if opaque:
        unnamed_call(probe, line)
        return OPAQUE
    if target is OPAQUE or probe.recorder.label_of(holder) is not None:
        return OPAQUE  # code the probe does not follow reads an object of the environment
    return UNKNOWN if combine(args) in (UNKNOWN, TRUSTED) else OPAQUE
