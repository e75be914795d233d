"""What a call in user code means to the environment probe.

A call of a Python function is followed into its frame (its return value comes back through the
return event). Calls the probe cannot follow are judged here: methods of known containers read
or change them, ``getattr``/``len``/``sorted``... read their arguments, and calls whose result
differs at every call (Python or numpy randomness, clocks, ``print``/``input``/``open``) fail
closed, because their result or effect would be baked into the graph.
"""

from __future__ import annotations

import builtins
import types
from typing import Any

from dualflow.tracer.call_kinds import (
    AWAIT,
    LAZY_CODE,
    MUTATORS,
    READ_MUTATORS,
    classify,
    constructed,
    is_lazy,
    nondeterministic,
    refuse,
    unnamed_call,
    user_callable,
    user_class,
    user_function,
)
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
    ENV_COLLECTION,
    OPAQUE,
    TRUSTED,
    UNKNOWN,
    combine,
    elements_plain,
    is_trusted_callable,
    is_trusted_object,
)
from dualflow.tracer.size_identity import told_apart
from dualflow.tracer.stack_model import (
    NULL,
    MadeFunction,
    Method,
    StackModel,
    call_parts,
    is_missing,
)
from dualflow.tracer.user_code import is_user_file


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
    elif user_function(callee):
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
        refuse(probe, why, line)
        return OPAQUE
    special = _builtin_reader(probe, callee, args, line)
    if special is not _NOT_SPECIAL:
        return special
    if user_function(callee) or user_class(callee) or user_callable(callee):
        if opaque:
            unnamed_call(probe, line)
        recorder.add_defaults(callee)
        if isinstance(callee, type):
            return constructed(callee, args)
        return ENV_COLLECTION if is_lazy(callee) else AWAIT
    for value in args:  # a C function may read its container arguments whole
        recorder.read_contents(value)
    return classify(probe, callee, args, line)


_NOT_SPECIAL: Any = object()


def _made_function(probe: Any, made: MadeFunction, opaque: bool, line: str) -> Any:
    """Calling a function the call made: a comprehension runs now and returns through its
    frame; a generator expression returns a generator whose frame runs (and yields) later."""
    if opaque:
        unnamed_call(probe, line)
        return OPAQUE
    if not is_user_file(made.code.co_filename):
        return OPAQUE
    return ENV_COLLECTION if made.code.co_flags & LAZY_CODE else AWAIT


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
    if (callee is builtins.type and len(args) == 1) or callee is builtins.id:
        told_apart(probe, f"{callee.__name__}()", args[:1], line, unseen=True)
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
        refuse(probe, why, line)
        return OPAQUE
    if isinstance(holder, types.ModuleType) and not is_missing(target):
        return _meaning(probe, target, args, line)  # `os.getenv(...)`: a function of a module
    opaque = any(v is OPAQUE for v in args)
    if bound is not None and is_trusted_callable(bound) and not user_function(bound):
        if opaque:
            unnamed_call(probe, line)
        return TRUSTED  # dualflow's own method (a static or class method too)
    if user_function(target) or (bound is not None and user_function(bound)):
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
