"""What each bytecode instruction of user code means to the environment probe's stack model.

One handler per instruction family: loads name what they push (and guard what they read),
stores and calls record what they touch, and every other instruction pushes the provenance of
what it popped (``provenance.combine``). The table covers every opcode of the Python versions
the probe is tested on (``MODELED``); an instruction outside it, or a value the probe cannot
name reaching an op, a branch, a store or a call, fails the trace closed (issue 35).
"""

from __future__ import annotations

import sys
from typing import Any

from dualflow.tracer import probe_calls, value_flow
from dualflow.tracer.env_guards import ATTR, CELL, GLOBAL, ITEM
from dualflow.tracer.provenance import (
    ENV_COLLECTION,
    OPAQUE,
    UNKNOWN,
)
from dualflow.tracer.stack_model import (
    BUILDS,
    NO_EFFECT,
    POP_ONLY,
    POP_PUSH,
    Instruction,
    Method,
    StackModel,
    attr_is_method,
    global_has_null,
)
from dualflow.tracer.value_flow import line_of, unnamed

TESTED_VERSIONS = frozenset({(3, 11)})  # the interpreters the test suite runs the probe on
# Instructions that change the stack in ways the model does not track value by value, but whose
# pushes are derived from what they popped: forgetting is safe unless an unnamed value is lost.
_DERIVED_FORGET = frozenset(
    {
        "RETURN_GENERATOR",
        "POP_EXCEPT",
        "PUSH_EXC_INFO",
        "CHECK_EXC_MATCH",
        "CHECK_EG_MATCH",
        "PREP_RERAISE_STAR",
        "RERAISE",
        "RAISE_VARARGS",
        "WITH_EXCEPT_START",
        "JUMP_IF_FALSE_OR_POP",
        "JUMP_IF_TRUE_OR_POP",
        "SETUP_ANNOTATIONS",
        "PRINT_EXPR",
        "DELETE_NAME",
        "GET_YIELD_FROM_ITER",
        "LOAD_ASSERTION_ERROR",
    }
)


# Opcodes of the tested versions that fail a trace closed on purpose: async code, pattern
# matching (it reads attributes and items by itself), class bodies and star imports in a step.
NOT_MODELED_ON_PURPOSE = frozenset(
    {
        "ASYNC_GEN_WRAP",
        "BEFORE_ASYNC_WITH",
        "END_ASYNC_FOR",
        "GET_AITER",
        "GET_ANEXT",
        "GET_AWAITABLE",
        "SEND",
        "LOAD_BUILD_CLASS",
        "MATCH_CLASS",
        "MATCH_KEYS",
        "MATCH_MAPPING",
        "MATCH_SEQUENCE",
        "IMPORT_STAR",
    }
)


# ----- loads ------------------------------------------------------------------------------------
def _load_const(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    model.push(ins.argval)


def _load_fast(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    names = ins.argval if isinstance(ins.argval, tuple) else (ins.argval,)
    local = frame.f_locals
    for name in names:
        model.push(OPAQUE if name in model.opaque_locals else local.get(name, UNKNOWN))


def _load_global(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    globals_ = frame.f_globals
    value = probe.recorder.read_global(
        globals_, frame.f_builtins, ins.argval, globals_.get("__name__")
    )
    model.push_loaded(value, global_has_null(ins))


def _load_name(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    local = frame.f_locals
    if local is not frame.f_globals and ins.argval in local:
        model.push(local[ins.argval])
    else:
        _load_global(probe, frame, model, ins)


def _load_deref(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
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


def _load_attr(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    (holder,) = model.pop(1)
    if attr_is_method(ins):
        _load_method(probe, frame, model, ins, holder)
        return
    value = probe.attribute(holder, ins.argval)
    if value is probe_calls.AWAIT:  # a property of user code: its getter's return names it
        model.push(OPAQUE)
        model.awaiting = True
    else:
        model.push(value)


def _load_method(
    probe: Any, frame: Any, model: StackModel, ins: Instruction, holder: Any = None
) -> None:
    if holder is None:
        (holder,) = model.pop(1)
    model.push(Method(holder, ins.argval), holder)


def _subscr(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    container, key = model.pop(2)
    value = probe.item(container, key)
    if value is probe_calls.AWAIT:  # a __getitem__ of user code: its return names it
        model.push(OPAQUE)
        model.awaiting = True
    else:
        model.push(value)


def _import_name(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    model.pop(2)
    module = sys.modules.get(ins.argval)
    if module is not None and "." in ins.argval:  # `import a.b` binds the package `a`
        module = sys.modules.get(ins.argval.partition(".")[0])
    if module is None:  # imported for the first time now: named when it is read next
        model.push(OPAQUE)
        return
    probe.recorder.add_root(module, ins.argval, ())
    model.push(module)


def _import_from(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    holder = model.values[-1] if model.values else OPAQUE
    model.push(probe.attribute(holder, ins.argval))


# ----- stores -----------------------------------------------------------------------------------
def _store_fast(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    (value,) = model.pop(1)
    if value is OPAQUE:
        model.opaque_locals.add(ins.argval)
    else:
        model.opaque_locals.discard(ins.argval)


def _delete_fast(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    model.opaque_locals.discard(ins.argval)


def _store_attr(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    popped = model.pop(1 if ins.name == "DELETE_ATTR" else 2)
    if any(v is OPAQUE for v in popped):
        unnamed(probe, frame, f"a store to attribute {ins.argval!r}")
    probe.recorder.write_to(ATTR, popped[-1], ins.argval, line_of(frame))


def _store_subscr(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    *values, container, key = model.pop(2 if ins.name == "DELETE_SUBSCR" else 3)
    env_array = id(container) in probe.recorder.arrays  # its in-place change fails it closed
    if not env_array and any(v is OPAQUE or v is ENV_COLLECTION for v in (*values, container, key)):
        unnamed(probe, frame, "a store into a container")
    probe.recorder.write_to(ITEM, container, key, line_of(frame))


def _store_global(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    popped = model.pop(1 if ins.name == "STORE_GLOBAL" else 0)
    if any(v is OPAQUE for v in popped):
        unnamed(probe, frame, f"the global {ins.argval}")
    probe.recorder.write(GLOBAL, frame.f_globals, ins.argval, line_of(frame))


def _store_deref(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    popped = model.pop(1 if ins.name == "STORE_DEREF" else 0)
    if any(v is OPAQUE for v in popped):
        unnamed(probe, frame, f"the closure variable {ins.argval}")
    if ins.argval in frame.f_code.co_freevars:
        for cell in probe.cells(frame, ins.argval)[0]:
            probe.recorder.write(CELL, cell, None, line_of(frame))


def _call(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    probe_calls.handle_call(probe, frame, model, ins)


def _call_ex(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    probe_calls.handle_call_ex(probe, frame, model, ins)


def _not_modeled(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    model.forget()
    probe.fail(
        f"the compiler does not model the instruction {ins.name} (Python "
        f"{sys.version_info[0]}.{sys.version_info[1]}), so it cannot tell what this line reads; "
        "the function runs eagerly",
        line_of(frame),
    )


HANDLERS: dict[str, Any] = {
    "LOAD_CONST": _load_const,
    "LOAD_FAST": _load_fast,
    "LOAD_FAST_CHECK": _load_fast,
    "LOAD_FAST_AND_CLEAR": _load_fast,
    "LOAD_FAST_LOAD_FAST": _load_fast,
    "LOAD_GLOBAL": _load_global,
    "LOAD_NAME": _load_name,
    "LOAD_DEREF": _load_deref,
    "LOAD_CLASSDEREF": _load_deref,
    "LOAD_CLOSURE": lambda probe, frame, model, ins: model.push(UNKNOWN),
    "LOAD_ATTR": _load_attr,
    "LOAD_METHOD": _load_method,
    "BINARY_SUBSCR": _subscr,
    "IMPORT_NAME": _import_name,
    "IMPORT_FROM": _import_from,
    "STORE_FAST": _store_fast,
    "DELETE_FAST": _delete_fast,
    "STORE_ATTR": _store_attr,
    "DELETE_ATTR": _store_attr,
    "STORE_SUBSCR": _store_subscr,
    "DELETE_SUBSCR": _store_subscr,
    "STORE_GLOBAL": _store_global,
    "DELETE_GLOBAL": _store_global,
    "STORE_DEREF": _store_deref,
    "DELETE_DEREF": _store_deref,
    "COPY": value_flow.copy_values,
    "DUP_TOP": value_flow.copy_values,
    "SWAP": value_flow.swap_values,
    "ROT_TWO": value_flow.swap_values,
    "PUSH_NULL": value_flow.push_null,
    "GET_ITER": value_flow.get_iter,
    "FOR_ITER": value_flow.for_iter,
    "UNPACK_SEQUENCE": value_flow.unpack,
    "UNPACK_EX": value_flow.unpack,
    "LIST_EXTEND": value_flow.extend,
    "SET_UPDATE": value_flow.extend,
    "DICT_UPDATE": value_flow.extend,
    "DICT_MERGE": value_flow.extend,
    "LIST_APPEND": value_flow.append,
    "SET_ADD": value_flow.append,
    "MAP_ADD": value_flow.append,
    "BUILD_MAP": value_flow.build,
    "BUILD_CONST_KEY_MAP": value_flow.build,
    "MAKE_FUNCTION": value_flow.build,
    "FORMAT_VALUE": value_flow.build,
    "LIST_TO_TUPLE": value_flow.build,
    "BEFORE_WITH": value_flow.before_with,
    "YIELD_VALUE": value_flow.yield_value,
    "RETURN_VALUE": value_flow.return_value,
    "CALL": _call,
    "CALL_FUNCTION": _call,
    "CALL_METHOD": _call,
    "CALL_KW": _call,
    "CALL_FUNCTION_KW": _call,
    "CALL_FUNCTION_EX": _call_ex,
}
for _name in BUILDS:
    HANDLERS.setdefault(_name, value_flow.build)
for _name in POP_PUSH:
    HANDLERS.setdefault(_name, value_flow.operate)
for _name in POP_ONLY:
    HANDLERS.setdefault(_name, value_flow.pop_only)
for _name in _DERIVED_FORGET:
    HANDLERS.setdefault(_name, value_flow.derived)


def handler_of(name: str) -> Any:
    """The handler of instruction ``name``: None for one without effect on the stack, the
    fail-closed handler for one the model does not know."""
    if name in NO_EFFECT:
        return None
    return HANDLERS.get(name, _not_modeled)
