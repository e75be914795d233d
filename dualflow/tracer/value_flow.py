"""How values flow through the stack for the environment probe: shuffles, iteration, containers,
operators, branches, ``with``, ``yield`` and ``return`` (issue 35).

Each handler pushes the provenance of what it popped (``provenance.combine``); an unnamed value
that decides a branch or a loop, or that the model would lose, fails the trace closed.
"""

from __future__ import annotations

from typing import Any

from dualflow.tracer import probe_calls
from dualflow.tracer.env_guards import is_value
from dualflow.tracer.provenance import (
    ENV_COLLECTION,
    OPAQUE,
    TRUSTED,
    UNKNOWN,
    combine,
    is_trusted_object,
)
from dualflow.tracer.size_identity import told_apart
from dualflow.tracer.stack_model import (
    NULL,
    POP_ONLY,
    POP_PUSH,
    Instruction,
    MadeFunction,
    StackModel,
)

# Results of these are plain values whatever their operands (a comparison, a length).
PLAIN_OPS = frozenset({"COMPARE_OP", "IS_OP", "CONTAINS_OP", "UNARY_NOT", "TO_BOOL", "GET_LEN"})


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


# ----- stack shuffles, iteration, containers ----------------------------------------------------
def copy_values(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    model.copy(ins.arg or 1)


def swap_values(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    model.swap(ins.arg or 2)


def push_null(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    model.push(NULL)


def get_iter(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    (value,) = model.pop(1)
    if value is OPAQUE or value is ENV_COLLECTION:
        model.push(value)  # its elements reach locals by name: fine unless opaque
        return
    probe_calls.iterated(probe, value, line_of(frame))
    model.push(UNKNOWN)


def for_iter(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    iterator = model.values[-1] if model.values else UNKNOWN
    if iterator is OPAQUE:  # how often the loop runs is decided by an unnamed value
        unnamed(probe, frame, "a for loop")
    model.push(OPAQUE if iterator is OPAQUE else UNKNOWN)
    model.loop_exit = ins.argval  # at that offset the iterator and element are gone


def unpack(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    (value,) = model.pop(1)
    count = ins.arg or 0
    if ins.name == "UNPACK_EX":
        count = (count & 0xFF) + (count >> 8) + 1
    else:
        probe.recorder.read_contents(value)
    model.push(*[OPAQUE if value is OPAQUE else UNKNOWN] * count)


def extend(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    (value,) = model.pop(1)
    probe.recorder.read_contents(value)
    _taint_below(model, ins.arg or 1, value)


def append(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
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


def build(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
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


def operate(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    """Operators and comparisons: they read their operands whole (containers' contents too)."""
    popped = model.pop(POP_PUSH[ins.name])
    if ins.name == "IS_OP":  # ``n is 4``: True for eager's small int, never for a SymInt
        told_apart(probe, "is", popped, line_of(frame), unseen=False)
    for value in popped:
        probe.recorder.read_contents(value)
    if any(v is OPAQUE for v in popped):
        if not all(v is OPAQUE or is_value(v) for v in popped):
            unnamed(probe, frame, f"an operator ({ins.name}) with a tensor or an object")
        model.push(OPAQUE)
    elif ins.name in PLAIN_OPS:
        model.push(UNKNOWN)
    else:
        model.push(combine(popped))


def pop_only(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    popped = model.pop(POP_ONLY[ins.name])
    if ins.name.startswith("POP_JUMP"):
        if popped[0] is OPAQUE:
            unnamed(probe, frame, "a branch")
        probe.recorder.read_contents(popped[0])  # `if items:` reads the length


def before_with(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    (manager,) = model.pop(1)
    if manager is OPAQUE:
        unnamed(probe, frame, "a with statement")
    trusted = manager is TRUSTED or is_trusted_object(manager)
    model.push(TRUSTED if trusted else UNKNOWN, TRUSTED if trusted else OPAQUE)


def yield_value(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    (value,) = model.pop(1)
    if value is OPAQUE:
        unnamed(probe, frame, "a yield")
    model.push(UNKNOWN)  # the value sent back in (None for iteration)


def return_value(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    (value,) = model.pop(1)
    if value is OPAQUE:
        model.returning_opaque = True  # the caller's call names it OPAQUE (or fails closed)
    model.forget()


def derived(probe: Any, frame: Any, model: StackModel, ins: Instruction) -> None:
    forget(probe, frame, model, f"an instruction the compiler forgets values at ({ins.name})")
