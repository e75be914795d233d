"""The environment probe: watch user code run while tracing, and report what it read and wrote.

Installed with ``sys.settrace`` for the tracing run only (chained with a debugger's or coverage's
trace function). Frames of user code get per-instruction events; a ``StackModel`` per frame names
the object each load, store and call acts on, and ``calls`` decides what a call means. dualflow's
own code, the standard library and numpy are not followed: their reads of user objects go through
Module/Optimizer versions and the tracer's hooks instead.
"""

from __future__ import annotations

import gc
import sys
import types
import weakref
from collections.abc import Callable
from typing import Any

from dualflow._config import env_flag
from dualflow.errors import KERNEL_MODULE_PREFIX
from dualflow.tracer import probe_calls
from dualflow.tracer.env_guards import MISSING, Dynamic, is_versioned, read_item, static_attr
from dualflow.tracer.env_record import EnvRecorder, key_label
from dualflow.tracer.instructions import TESTED_VERSIONS, handler_of, line_of, unnamed
from dualflow.tracer.provenance import (
    ENV_COLLECTION,
    OPAQUE,
    TRUSTED,
    UNKNOWN,
    elements_plain,
    is_trusted_object,
)
from dualflow.tracer.stack_model import StackModel, instructions, is_missing
from dualflow.tracer.user_code import is_user_file


def _generated(frame: types.FrameType) -> bool:
    """Methods the standard library writes for a class (dataclass ``__init__``, namedtuple
    ``__new__``): they read only what the class definition fixed; and dualflow's kernel modules,
    whose file is in the kernels store (``numba_elementwise.load_module`` runs one when an eager op
    first needs it: its ``numba.njit`` is no global of the user's)."""
    code = frame.f_code
    if not code.co_filename.startswith("<"):
        return str(frame.f_globals.get("__name__", "")).startswith(KERNEL_MODULE_PREFIX)
    qualname = getattr(code, "co_qualname", code.co_name)
    return qualname.startswith("__create_fn__") or str(
        frame.f_globals.get("__name__", "")
    ).startswith("namedtuple_")


def untested_allowed() -> bool:
    """``DUALFLOW_UNTESTED_PYTHON``: compile on a Python the probe is not tested on (at your
    own risk; read at each trace on such a Python only).

    Example:
        >>> untested_allowed()
        False
    """
    return env_flag("DUALFLOW_UNTESTED_PYTHON")


class EnvProbe:
    """Context manager around a tracing run; ``fail(message, line)`` records fail-closed events."""

    def __init__(self, recorder: EnvRecorder, fail: Callable[[str, str], None], fn: Any) -> None:
        self.recorder, self.fail = recorder, fail
        self._fn = getattr(fn, "__func__", fn)
        self._returns: dict[int, Any] = {}
        self._ran: set[types.CodeType] = set()
        self._cells: dict[types.CodeType, list[Any]] = {}
        self._previous: Any = None

    def __enter__(self) -> EnvProbe:
        if sys.version_info[:2] not in TESTED_VERSIONS and not untested_allowed():
            code = getattr(self._fn, "__code__", None)
            where = f"{code.co_filename}:{code.co_firstlineno}" if code else None
            self.fail(
                f"the compiler's model of Python bytecode is tested on Python "
                f"{', '.join(f'{a}.{b}' for a, b in sorted(TESTED_VERSIONS))} only, and this is "
                f"{sys.version_info[0]}.{sys.version_info[1]}: it cannot vouch that the trace "
                "read nothing it would miss, so the function runs eagerly "
                "(DUALFLOW_UNTESTED_PYTHON=1 compiles anyway, at your own risk)",
                where,
            )
        self._previous = sys.gettrace()
        sys.settrace(self._on_call)
        return self

    def __exit__(self, *exc: Any) -> None:
        sys.settrace(self._previous)
        self._returns.clear()  # return values no traced caller took (the run's tensors)

    # ----- frames ----------------------------------------------------------------------------
    def _on_call(self, frame: types.FrameType, event: str, arg: Any) -> Any:
        previous = self._previous(frame, event, arg) if self._previous is not None else None
        code = frame.f_code
        if not is_user_file(code.co_filename) or _generated(frame) or self._library_eval(frame):
            return previous
        self._ran.add(code)
        frame.f_trace_opcodes = True
        model = StackModel()

        def local(frame: types.FrameType, event: str, arg: Any) -> Any:
            nonlocal previous
            if previous is not None and event != "opcode":
                previous = previous(frame, event, arg)
            if event == "opcode":
                self._step(frame, model)
            elif event == "return" and frame.f_back is not None:
                opaque, caller = model.returning_opaque, frame.f_back
                if not is_user_file(caller.f_code.co_filename):  # no model waits for it there
                    if opaque:
                        unnamed(self, frame, "the compiled function's result")
                else:
                    self._returns[id(caller)] = OPAQUE if opaque else arg
            elif event == "exception":
                model.awaiting = False  # the call raised: no return value comes
                model.forget()
            return itself()  # a closure naming itself is a cycle (its own cell) that would
            # keep the stack model's tensors until the garbage collector runs

        itself = weakref.ref(local)  # the frame holds ``local`` while it runs
        return local

    def _library_eval(self, frame: types.FrameType) -> bool:
        """Code a library compiled from a string (numba's signature parser, ``eval`` in the
        standard library): its file is ``<string>`` and no user code called it."""
        code = frame.f_code
        if not code.co_filename.startswith("<") or code is getattr(self._fn, "__code__", None):
            return False
        caller = frame.f_back
        return caller is None or not is_user_file(caller.f_code.co_filename)

    def _step(self, frame: types.FrameType, model: StackModel) -> None:
        if model.awaiting:  # the previous instruction was a call: its callee's return value
            model.awaiting = False
            model.values[-1:] = [self._returns.pop(id(frame), OPAQUE)]
        elif self._returns.get(id(frame)) is OPAQUE:  # returned through a call not awaited
            del self._returns[id(frame)]
            unnamed(self, frame, "a call's result")
        if model.loop_exit is not None:
            if frame.f_lasti == model.loop_exit:  # the loop ended: iterator and element gone
                model.pop(2)
            model.loop_exit = None
        ins = instructions(frame.f_code).get(frame.f_lasti)
        if ins is None:
            return
        handler = handler_of(ins.name)
        if handler is None:
            return
        try:
            handler(self, frame, model, ins)
        except Exception as exc:  # a gap in the model must not break the call: fail closed
            if type(exc).__name__ == "TracingError":
                raise
            model.forget()
            self.fail(f"the compiler could not follow {ins.name} ({exc!r})", line_of(frame))

    # ----- what handlers call --------------------------------------------------------------------
    def attribute(self, holder: Any, name: str) -> Any:
        """Read ``holder.name`` as the program will, guarding it when ``holder`` is known."""
        if holder is OPAQUE or holder is ENV_COLLECTION:
            return OPAQUE  # an element or attribute of an unnamed object of the environment
        if holder is TRUSTED:
            return TRUSTED
        if isinstance(holder, tuple) and name in getattr(type(holder), "_fields", ()):
            return self.item(holder, type(holder)._fields.index(name))  # a namedtuple's field
        if is_missing(holder) or isinstance(holder, list | dict | set | tuple | str):
            return UNKNOWN
        versioned = is_versioned(holder)
        try:
            value = (
                probe_calls.versioned_read(holder, name) if versioned else static_attr(holder, name)
            )
        except Dynamic:
            return self._dynamic_attribute(holder, name)
        if versioned:  # Modules/Optimizers: their version guards assignments; follow the value
            if name == "training":  # the flag train()/eval() in the call may change (module_reads)
                self.recorder.flag_reads.add(id(holder))
            self.recorder.observe_through(holder, f".{name}", ("attr", name), value)
        else:
            self.recorder.read_attr(holder, name, value)
        return value

    def _dynamic_attribute(self, holder: Any, name: str) -> Any:
        """An attribute read that runs code (a property, ``__getattr__``): dualflow's own objects
        are trusted; user code's getter is followed and its return names the value; anything
        else (a C or standard-library descriptor) is opaque when it reads the environment."""
        if is_trusted_object(holder):
            return TRUSTED
        if isinstance(holder, types.ModuleType):  # a module's __getattr__ (lazy attributes)
            return _module_attribute(holder)
        if isinstance(holder, type):
            return UNKNOWN  # a class property or classmethod: derived from the class itself
        if _runs_user_code(type(holder), name):
            return probe_calls.AWAIT
        return OPAQUE if self._of_environment(holder) else UNKNOWN

    def item(self, container: Any, key: Any) -> Any:
        if container is OPAQUE or container is ENV_COLLECTION or key is OPAQUE:
            return OPAQUE
        if container is TRUSTED:
            return TRUSTED
        if is_missing(container):
            return UNKNOWN
        if is_missing(key):
            self.recorder.read_contents(container)
            return self._unknown_element(container)
        if is_versioned(container):  # e.g. a ModuleList: versioned, reading is pure
            value = probe_calls.versioned_item(container, key)
            self.recorder.observe_through(container, f"[{key_label(key)}]", ("item", key), value)
            return value
        try:
            value = read_item(container, key)
        except Dynamic:
            return self._dynamic_item(container)
        self.recorder.read_item(container, key, value)
        return UNKNOWN if value is MISSING else value

    def _unknown_element(self, container: Any) -> Any:
        """An element of a concrete container picked by a key the model cannot name."""
        if isinstance(container, list | tuple | dict | set | frozenset):
            return UNKNOWN if elements_plain(container) else OPAQUE
        return self._dynamic_item(container)

    def _dynamic_item(self, container: Any) -> Any:
        if is_trusted_object(container):
            return TRUSTED
        if _runs_user_code(type(container), "__getitem__"):
            return probe_calls.AWAIT
        return OPAQUE if self._of_environment(container) else UNKNOWN

    def _of_environment(self, obj: Any) -> bool:
        """Whether ``obj`` is an object of the environment the trace reached by name (a named
        object the recorder does not know was made by the call or derived from such)."""
        return self.recorder.label_of(obj) is not None

    def cells(self, frame: types.FrameType, name: str) -> tuple[list[Any], tuple]:
        """The closure cells ``name`` of the running function (and its plan-cache path)."""
        code = frame.f_code
        if code is getattr(self._fn, "__code__", None):
            functions, path = [self._fn], (("cell", name),)
        elif any(code in c.co_consts for c in self._ran if c is not code):
            return [], ()  # a closure made during this call: its cells hold derived values
        else:
            functions, path = self._functions_of(code), ()
        index = code.co_freevars.index(name)
        return [f.__closure__[index] for f in functions if f.__closure__], path

    def _functions_of(self, code: types.CodeType) -> list[Any]:
        found = self._cells.get(code)
        if found is None:
            found = [
                f
                for f in gc.get_referrers(code)
                if isinstance(f, types.FunctionType) and f.__code__ is code
            ]
            self._cells[code] = found
        return found


def _module_attribute(module: types.ModuleType) -> Any:
    """A name a module makes in its ``__getattr__``: dualflow's own lazy attributes are trusted,
    a user module's ``__getattr__`` is followed, any other is opaque."""
    name = getattr(module, "__name__", "")
    if name == "dualflow" or name.startswith("dualflow."):
        return TRUSTED
    getter = module.__dict__.get("__getattr__")
    code = getattr(getter, "__code__", None)
    return probe_calls.AWAIT if code is not None and is_user_file(code.co_filename) else OPAQUE


def _runs_user_code(cls: type, name: str) -> bool:
    """Whether reading ``name`` on instances of ``cls`` runs a Python function of user code
    (a property's getter, ``__getattr__``, ``__getitem__``), whose frame the probe follows."""
    for klass in cls.__mro__:
        found = klass.__dict__.get(name)
        if found is None and name != "__getitem__":
            found = klass.__dict__.get("__getattr__")
        if found is None:
            continue
        function = getattr(found, "fget", found)
        code = getattr(function, "__code__", None)
        return code is not None and is_user_file(code.co_filename)
    return False
