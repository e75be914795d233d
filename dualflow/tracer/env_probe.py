"""The environment probe: watch user code run while tracing, and report what it read and wrote.

Installed with ``sys.settrace`` for the tracing run only (chained with a debugger's or coverage's
trace function). Frames of user code get per-instruction events; a ``StackModel`` per frame names
the object each load, store and call acts on, and ``calls`` decides what a call means. dualflow's
own code, the standard library and numpy are not followed: their reads of user objects go through
Module/Optimizer versions and the tracer's hooks instead.
"""

from __future__ import annotations

import gc
import os
import sys
import sysconfig
import types
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from dualflow.errors import BENCH_DIR, GENERATED_PREFIX, KERNEL_MODULE_PREFIX
from dualflow.tracer import calls
from dualflow.tracer.env_guards import (
    ATTR,
    CELL,
    GLOBAL,
    ITEM,
    MISSING,
    Dynamic,
    is_versioned,
    read_item,
    static_attr,
)
from dualflow.tracer.env_record import EnvRecorder
from dualflow.tracer.stack_model import (
    BUILDS,
    NO_EFFECT,
    NULL,
    POP_ONLY,
    POP_PUSH,
    UNKNOWN,
    Instruction,
    Method,
    StackModel,
    attr_is_method,
    global_has_null,
    instructions,
    is_missing,
)

_DUALFLOW = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_USER_INSIDE = (BENCH_DIR,)  # workloads are user code
_LIBRARY = tuple(
    {sysconfig.get_paths()[k] + os.sep for k in ("stdlib", "platstdlib")}
    | {os.path.dirname(np.__file__) + os.sep}
)
_USER_FILES: dict[str, bool] = {}


def is_user_file(filename: str) -> bool:
    """Whether code from ``filename`` is followed by the probe (not dualflow, stdlib, numpy).

    Example:
        >>> is_user_file("/home/me/train.py"), is_user_file(np.__file__)
        (True, False)
    """
    known = _USER_FILES.get(filename)
    if known is None:
        library = filename.startswith((_DUALFLOW, *_LIBRARY, GENERATED_PREFIX, "<frozen"))
        known = _USER_FILES[filename] = not library or filename.startswith(_USER_INSIDE)
    return known


def _generated(frame: types.FrameType) -> bool:
    """Methods the standard library writes for a class (dataclass ``__init__``, namedtuple
    ``__new__``): they read only what the class definition fixed; and dualflow's kernel modules,
    whose file is in the kernels store (``cpu_numba.load_module`` runs one when an eager op first
    needs it: its ``numba.njit`` is no global of the user's)."""
    code = frame.f_code
    if not code.co_filename.startswith("<"):
        return str(frame.f_globals.get("__name__", "")).startswith(KERNEL_MODULE_PREFIX)
    qualname = getattr(code, "co_qualname", code.co_name)
    return qualname.startswith("__create_fn__") or str(
        frame.f_globals.get("__name__", "")
    ).startswith("namedtuple_")


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
        if not is_user_file(code.co_filename) or _generated(frame):
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
                self._returns[id(frame.f_back)] = arg
            elif event == "exception":
                model.forget()
            return itself()  # a closure naming itself is a cycle (its own cell) that would
            # keep the stack model's tensors until the garbage collector runs

        itself = weakref.ref(local)  # the frame holds ``local`` while it runs
        return local

    def _step(self, frame: types.FrameType, model: StackModel) -> None:
        if model.awaiting:  # the previous instruction was a call: its callee's return value
            model.awaiting = False
            model.values[-1:] = [self._returns.pop(id(frame), UNKNOWN)]
        ins = instructions(frame.f_code).get(frame.f_lasti)
        if ins is None or ins.name in NO_EFFECT:
            return
        handler = _HANDLERS.get(ins.name)
        try:
            if handler is not None:
                handler(self, frame, model, ins)
            else:
                self._generic(frame, model, ins)
        except Exception as exc:  # a gap in the model must not break the call: fail closed
            if type(exc).__name__ == "TracingError":
                raise
            model.forget()
            self.fail(f"the compiler could not follow {ins.name} ({exc!r})", line_of(frame))

    def _generic(self, frame: types.FrameType, model: StackModel, ins: Instruction) -> None:
        name = ins.name
        if name in POP_PUSH:
            for value in model.pop(POP_PUSH[name]):
                self.recorder.read_contents(value)  # comparing, `in`, operators read it whole
            model.push(UNKNOWN)
        elif name in POP_ONLY:
            popped = model.pop(POP_ONLY[name])
            if name.startswith("POP_JUMP"):  # `if items:` reads the length
                self.recorder.read_contents(popped[0])
        elif name in BUILDS:
            model.pop(ins.arg or 0)
            model.push(UNKNOWN)
        else:
            model.forget()

    # ----- what handlers call --------------------------------------------------------------------
    def attribute(self, holder: Any, name: str) -> Any:
        """Read ``holder.name`` as the program will, guarding it when ``holder`` is known."""
        if is_missing(holder) or isinstance(holder, list | dict | set | tuple | str):
            return UNKNOWN
        versioned = is_versioned(holder)
        try:
            value = calls.versioned_read(holder, name) if versioned else static_attr(holder, name)
        except Dynamic:
            return UNKNOWN
        if versioned:  # Modules/Optimizers: their version guards assignments; follow the value
            self.recorder.observe_through(holder, f".{name}", ("attr", name), value)
        else:
            self.recorder.read_attr(holder, name, value)
        return value

    def item(self, container: Any, key: Any) -> Any:
        if is_missing(container):
            return UNKNOWN
        if is_missing(key):
            self.recorder.read_contents(container)
            return UNKNOWN
        if is_versioned(container):  # e.g. a ModuleList: versioned, reading is pure
            value = calls.versioned_item(container, key)
            self.recorder.observe_through(container, f"[{key!r}]", ("item", key), value)
            return value
        try:
            value = read_item(container, key)
        except Dynamic:
            return UNKNOWN
        self.recorder.read_item(container, key, value)
        return UNKNOWN if value is MISSING else value

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


def line_of(frame: types.FrameType) -> str:
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


# ----- instruction handlers ---------------------------------------------------------------------
def _load_const(probe: EnvProbe, frame: Any, model: StackModel, ins: Instruction) -> None:
    model.push(ins.argval)


def _load_fast(probe: EnvProbe, frame: Any, model: StackModel, ins: Instruction) -> None:
    names = ins.argval if isinstance(ins.argval, tuple) else (ins.argval,)
    local = frame.f_locals
    model.push(*(local.get(n, UNKNOWN) for n in names))


def _load_global(probe: EnvProbe, frame: Any, model: StackModel, ins: Instruction) -> None:
    globals_ = frame.f_globals
    value = probe.recorder.read_global(
        globals_, frame.f_builtins, ins.argval, globals_.get("__name__")
    )
    model.push_loaded(value, global_has_null(ins))


def _load_name(probe: EnvProbe, frame: Any, model: StackModel, ins: Instruction) -> None:
    local = frame.f_locals
    if local is not frame.f_globals and ins.argval in local:
        model.push(local[ins.argval])
    else:
        _load_global(probe, frame, model, ins)


def _load_deref(probe: EnvProbe, frame: Any, model: StackModel, ins: Instruction) -> None:
    name = ins.argval
    value = frame.f_locals.get(name, UNKNOWN)
    if name in frame.f_code.co_freevars:
        cells, path = probe.cells(frame, name)
        for cell in cells:
            try:
                held = cell.cell_contents
            except ValueError:
                continue
            if held is value:
                probe.recorder.read_cell(cell, name, value, path)
    model.push(value)


def _load_attr(probe: EnvProbe, frame: Any, model: StackModel, ins: Instruction) -> None:
    (holder,) = model.pop(1)
    if attr_is_method(ins):
        _load_method(probe, frame, model, ins, holder)
        return
    model.push(probe.attribute(holder, ins.argval))


def _load_method(
    probe: EnvProbe, frame: Any, model: StackModel, ins: Instruction, holder: Any = None
) -> None:
    if holder is None:
        (holder,) = model.pop(1)
    model.push(Method(holder, ins.argval), holder)


def _subscr(probe: EnvProbe, frame: Any, model: StackModel, ins: Instruction) -> None:
    container, key = model.pop(2)
    model.push(probe.item(container, key))


def _store_attr(probe: EnvProbe, frame: Any, model: StackModel, ins: Instruction) -> None:
    popped = model.pop(1 if ins.name == "DELETE_ATTR" else 2)
    probe.recorder.write_to(ATTR, popped[-1], ins.argval, line_of(frame))


def _store_subscr(probe: EnvProbe, frame: Any, model: StackModel, ins: Instruction) -> None:
    *_, container, key = model.pop(2 if ins.name == "DELETE_SUBSCR" else 3)
    probe.recorder.write_to(ITEM, container, key, line_of(frame))


def _store_global(probe: EnvProbe, frame: Any, model: StackModel, ins: Instruction) -> None:
    model.pop(1 if ins.name == "STORE_GLOBAL" else 0)
    probe.recorder.write(GLOBAL, frame.f_globals, ins.argval, line_of(frame))


def _store_deref(probe: EnvProbe, frame: Any, model: StackModel, ins: Instruction) -> None:
    model.pop(1 if ins.name == "STORE_DEREF" else 0)
    if ins.argval in frame.f_code.co_freevars:
        for cell in probe.cells(frame, ins.argval)[0]:
            probe.recorder.write(CELL, cell, None, line_of(frame))


def _copy(probe: EnvProbe, frame: Any, model: StackModel, ins: Instruction) -> None:
    model.copy(ins.arg or 1)


def _swap(probe: EnvProbe, frame: Any, model: StackModel, ins: Instruction) -> None:
    model.swap(ins.arg or 2)


def _push_null(probe: EnvProbe, frame: Any, model: StackModel, ins: Instruction) -> None:
    model.push(NULL)


def _get_iter(probe: EnvProbe, frame: Any, model: StackModel, ins: Instruction) -> None:
    (value,) = model.pop(1)
    calls.iterated(probe, value, line_of(frame))
    model.push(UNKNOWN)


def _unpack(probe: EnvProbe, frame: Any, model: StackModel, ins: Instruction) -> None:
    (value,) = model.pop(1)
    probe.recorder.read_contents(value)
    model.forget()


def _extend(probe: EnvProbe, frame: Any, model: StackModel, ins: Instruction) -> None:
    (value,) = model.pop(1)
    probe.recorder.read_contents(value)


def _call(probe: EnvProbe, frame: Any, model: StackModel, ins: Instruction) -> None:
    calls.handle_call(probe, frame, model, ins)


_HANDLERS: dict[str, Any] = {
    "LOAD_CONST": _load_const,
    "LOAD_FAST": _load_fast,
    "LOAD_FAST_CHECK": _load_fast,
    "LOAD_FAST_AND_CLEAR": _load_fast,
    "LOAD_FAST_LOAD_FAST": _load_fast,
    "LOAD_GLOBAL": _load_global,
    "LOAD_NAME": _load_name,
    "LOAD_DEREF": _load_deref,
    "LOAD_CLASSDEREF": _load_deref,
    "LOAD_ATTR": _load_attr,
    "LOAD_METHOD": _load_method,
    "BINARY_SUBSCR": _subscr,
    "STORE_ATTR": _store_attr,
    "DELETE_ATTR": _store_attr,
    "STORE_SUBSCR": _store_subscr,
    "DELETE_SUBSCR": _store_subscr,
    "STORE_GLOBAL": _store_global,
    "DELETE_GLOBAL": _store_global,
    "STORE_DEREF": _store_deref,
    "DELETE_DEREF": _store_deref,
    "COPY": _copy,
    "DUP_TOP": _copy,
    "SWAP": _swap,
    "ROT_TWO": _swap,
    "PUSH_NULL": _push_null,
    "GET_ITER": _get_iter,
    "UNPACK_SEQUENCE": _unpack,
    "LIST_EXTEND": _extend,
    "SET_UPDATE": _extend,
    "DICT_UPDATE": _extend,
    "DICT_MERGE": _extend,
    "CALL": _call,
    "CALL_FUNCTION": _call,
    "CALL_METHOD": _call,
    "CALL_KW": _call,
    "CALL_FUNCTION_KW": _call,
}
