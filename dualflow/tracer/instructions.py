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

from dualflow.tracer import calls
from dualflow.tracer.env_guards import ATTR, CELL, GLOBAL, ITEM, is_value
from dualflow.tracer.provenance import (
    ENV_COLLECTION,
    OPAQUE,
    TRUSTED,
    UNKNOWN,
    combine,
    is_trusted_object,
)
from dualflow.tracer.stack_model import (
    BUILDS,
    NO_EFFECT,
    NULL,
    POP_ONLY,
    POP_PUSH,
    Instruction,
    MadeFunction,
    Method,
    StackModel,
    attr_is_method,
    global_has_null,
)

TESTED_VERSIONS = frozenset({(3, 11)})  # the interpreters the test suite runs the probe on
# Results of these are plain values whatever their operands (a comparison, a length).
_PLAIN_OPS = frozenset({"COMPARE_OP", "IS_OP", "CONTAINS_OP", "UNARY_NOT", "TO_BOOL", "GET_LEN"})
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


def line_of(frame: Any) -> str:
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def unnamed(probe: Any, frame: Any, what: str) -> None:
    """Fail the trace closed: a value the probe could not name reached ``what``."""
    probe.fail(
        f"a value this line reads through code the compiler cannot follow (a C function, the "
        f"standard library, a property or an unnamed object) reaches {what}; it could change "
        "between calls with no guard to notice, so the function runs eagerly. Read the value "
        "directly (a global, an attribute, a dict item), or pass it as an argument",
        line_of(frame),
    )


def forget(probe: Any, frame: Any, model: StackModel, why: str) -> None:
    """Drop what the model knows; an unnamed value lost that way fails the trace closed."""
    if model.holds_unnamed():
        unnamed(probe, frame, why)
    model.forget()


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
    if value is calls.AWAIT:  # a property of user code: its getter's return names it
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
    if value is calls.AWAIT:  # a __getitem__ of user code: its return names it
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


# ----- stack shuffles, iteration, containers ----------------------------------------------------
def _copy(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    model.copy(ins.arg or 1)


def _swap(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    model.swap(ins.arg or 2)


def _push_null(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    model.push(NULL)


def _get_iter(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    (value,) = model.pop(1)
    if value is OPAQUE or value is ENV_COLLECTION:
        model.push(value)  # its elements reach locals by name: fine unless opaque
        return
    calls.iterated(probe, value, line_of(frame))
    model.push(UNKNOWN)


def _for_iter(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    iterator = model.values[-1] if model.values else UNKNOWN
    if iterator is OPAQUE:  # how often the loop runs is decided by an unnamed value
        unnamed(probe, frame, "a for loop")
    model.push(OPAQUE if iterator is OPAQUE else UNKNOWN)
    model.loop_exit = ins.argval  # at that offset the iterator and element are gone


def _unpack(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    (value,) = model.pop(1)
    count = ins.arg or 0
    if ins.name == "UNPACK_EX":
        count = (count & 0xFF) + (count >> 8) + 1
    else:
        probe.recorder.read_contents(value)
    model.push(*[OPAQUE if value is OPAQUE else UNKNOWN] * count)


def _extend(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    (value,) = model.pop(1)
    probe.recorder.read_contents(value)
    _taint_below(model, ins.arg or 1, value)


def _append(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    """LIST_APPEND / SET_ADD / MAP_ADD of a comprehension: the collection below takes on the
    provenance of what is added to it."""
    values = model.pop(2 if ins.name == "MAP_ADD" else 1)
    _taint_below(model, ins.arg or 1, combine(values))


def _taint_below(model: StackModel, depth: int, added: Any) -> None:
    worse = combine([added])
    if worse is UNKNOWN or worse is TRUSTED or depth > len(model.values):
        return
    held = model.values[-depth]
    model.values[-depth] = combine([held, worse]) if held is not UNKNOWN else worse


def _build(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    count = ins.arg or 0
    if ins.name == "BUILD_MAP":
        count *= 2
    elif ins.name == "BUILD_CONST_KEY_MAP":
        count += 1
    elif ins.name == "MAKE_FUNCTION":
        count = 1 + bin((ins.arg or 0) & 0x0F).count("1")
    elif ins.name == "FORMAT_VALUE":
        count = 2 if (ins.arg or 0) & 0x04 else 1
    elif ins.name == "LIST_TO_TUPLE":
        count = 1
    popped = model.pop(count)
    if ins.name == "MAKE_FUNCTION" and hasattr(popped[-1], "co_code"):
        opaque = any(v is OPAQUE for v in popped)  # defaults or closure it cannot name
        model.push(OPAQUE if opaque else MadeFunction(popped[-1]))
        return
    plain = ins.name in ("BUILD_STRING", "FORMAT_VALUE", "MAKE_FUNCTION", "BUILD_SLICE")
    model.push(_plain(popped) if plain else combine(popped))


def _plain(popped: list[Any]) -> Any:
    return OPAQUE if any(v is OPAQUE for v in popped) else UNKNOWN


def _operate(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    """Operators and comparisons: they read their operands whole (containers' contents too)."""
    popped = model.pop(POP_PUSH[ins.name])
    for value in popped:
        probe.recorder.read_contents(value)
    if any(v is OPAQUE for v in popped):
        if not all(v is OPAQUE or is_value(v) for v in popped):
            unnamed(probe, frame, f"an operator ({ins.name}) with a tensor or an object")
        model.push(OPAQUE)
    elif ins.name in _PLAIN_OPS:
        model.push(UNKNOWN)
    else:
        model.push(combine(popped))


def _pop_only(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    popped = model.pop(POP_ONLY[ins.name])
    if ins.name.startswith("POP_JUMP"):
        if popped[0] is OPAQUE:
            unnamed(probe, frame, "a branch")
        probe.recorder.read_contents(popped[0])  # `if items:` reads the length


def _call(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    calls.handle_call(probe, frame, model, ins)


def _call_ex(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    calls.handle_call_ex(probe, frame, model, ins)


def _before_with(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    (manager,) = model.pop(1)
    if manager is OPAQUE:
        unnamed(probe, frame, "a with statement")
    trusted = manager is TRUSTED or is_trusted_object(manager)
    model.push(TRUSTED if trusted else UNKNOWN, TRUSTED if trusted else OPAQUE)


def _yield(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    (value,) = model.pop(1)
    if value is OPAQUE:
        unnamed(probe, frame, "a yield")
    model.push(UNKNOWN)  # the value sent back in (None for iteration)


def _return(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    (value,) = model.pop(1)
    if value is OPAQUE:
        model.returning_opaque = True  # the caller's call names it OPAQUE (or fails closed)
    model.forget()


def _derived(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    forget(probe, frame, model, f"an instruction the compiler forgets values at ({ins.name})")


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
    "COPY": _copy,
    "DUP_TOP": _copy,
    "SWAP": _swap,
    "ROT_TWO": _swap,
    "PUSH_NULL": _push_null,
    "GET_ITER": _get_iter,
    "FOR_ITER": _for_iter,
    "UNPACK_SEQUENCE": _unpack,
    "UNPACK_EX": _unpack,
    "LIST_EXTEND": _extend,
    "SET_UPDATE": _extend,
    "DICT_UPDATE": _extend,
    "DICT_MERGE": _extend,
    "LIST_APPEND": _append,
    "SET_ADD": _append,
    "MAP_ADD": _append,
    "BUILD_MAP": _build,
    "BUILD_CONST_KEY_MAP": _build,
    "MAKE_FUNCTION": _build,
    "FORMAT_VALUE": _build,
    "LIST_TO_TUPLE": _build,
    "BEFORE_WITH": _before_with,
    "YIELD_VALUE": _yield,
    "RETURN_VALUE": _return,
    "CALL": _call,
    "CALL_FUNCTION": _call,
    "CALL_METHOD": _call,
    "CALL_KW": _call,
    "CALL_FUNCTION_KW": _call,
    "CALL_FUNCTION_EX": _call_ex,
}
for _name in BUILDS:
    HANDLERS.setdefault(_name, _build)
for _name in POP_PUSH:
    HANDLERS.setdefault(_name, _operate)
for _name in POP_ONLY:
    HANDLERS.setdefault(_name, _pop_only)
for _name in _DERIVED_FORGET:
    HANDLERS.setdefault(_name, _derived)


def handler_of(name: str) -> Any:
    """The handler of instruction ``name``: None for one without effect on the stack, the
    fail-closed handler for one the model does not know."""
    if name in NO_EFFECT:
        return None
    return HANDLERS.get(name, _not_modeled)
