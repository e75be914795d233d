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
import os
import random
import time
import types
import uuid
from typing import Any

import numpy as np

from dualflow.tracer.env_guards import ATTR, CONTENT, MISSING, Dynamic, read_item, static_attr
from dualflow.tracer.stack_model import NULL, UNKNOWN, Method, StackModel, call_parts, is_missing

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
    result = _meaning(probe, callee, bound, args, f"{frame.f_code.co_filename}:{frame.f_lineno}")
    if result is AWAIT:
        model.push(UNKNOWN)
        model.awaiting = True
    else:
        model.push(result)


def _meaning(probe: Any, callee: Any, bound: Any, args: list[Any], line: str) -> Any:
    recorder = probe.recorder
    if isinstance(callee, Method):
        return _method(probe, callee, args, line)
    if is_missing(callee):
        for value in args:
            recorder.read_contents(value)
        return UNKNOWN
    why = nondeterministic(callee, args)
    if why is not None:
        _refuse(probe, why, line)
        return UNKNOWN
    if callee is builtins.getattr or callee is builtins.hasattr:
        return _getattr(probe, args, callee is builtins.getattr)
    if callee is builtins.setattr or callee is builtins.delattr:
        if args and isinstance(args[1] if len(args) > 1 else None, str):
            recorder.write_to(ATTR, args[0], args[1], line)
        return UNKNOWN
    if callee is builtins.next:
        if args:
            iterated(probe, args[0], line)
        return UNKNOWN
    if isinstance(callee, types.FunctionType | types.MethodType):
        recorder.add_defaults(callee)
        return AWAIT
    try:
        reads_all = callee in CONTENT_READERS
    except TypeError:
        reads_all = False
    if reads_all or not isinstance(callee, type):
        for value in args:  # a C function may read its container arguments whole
            recorder.read_contents(value)
    return UNKNOWN


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
    if len(args) < 2 or not isinstance(args[1], str):
        for value in args:
            probe.recorder.read_contents(value)
        return UNKNOWN
    value = probe.attribute(args[0], args[1])
    return value if wants_value and value is not MISSING else UNKNOWN


def _method(probe: Any, method: Method, args: list[Any], line: str) -> Any:
    holder, name, recorder = method.holder, method.name, probe.recorder
    kind = next((k for k in MUTATORS if isinstance(holder, k)), None)
    if kind is None:
        target = probe.attribute(holder, name)  # guards the method itself when holder is known
        bound = getattr(holder, name, None) if not is_missing(holder) else None
        why = nondeterministic(bound, args) if bound is not None else None
        if why is not None:
            _refuse(probe, why, line)
        if isinstance(target, types.FunctionType):
            recorder.add_defaults(target)
            return AWAIT
        for value in args:
            recorder.read_contents(value)
        return UNKNOWN
    for value in args:
        recorder.read_contents(value)  # extend(other), update(other) read their argument
    if name in MUTATORS[kind]:
        if name in READ_MUTATORS:
            recorder.read_contents(holder)
        recorder.write_to(CONTENT, holder, None, line)
        return UNKNOWN
    if name == "get" and kind is dict and args and not is_missing(args[0]):
        value = probe.item(holder, args[0])
        if value is UNKNOWN and len(args) > 1:
            return UNKNOWN
        return value if read_item(holder, args[0]) is not MISSING else UNKNOWN
    recorder.read_contents(holder)  # keys(), items(), index(), count(), copy()...
    return UNKNOWN
