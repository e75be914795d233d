"""A model of the top of one frame's value stack, advanced instruction by instruction.

The environment probe sees each instruction of user code before it runs. This model keeps the
values it can know (constants, locals, globals, attributes and items it read itself) so that an
attribute read, a subscript, a store or a call can name the object it acts on. An instruction it
does not model forgets what it knew (the model only ever under-approximates the stack).
"""

from __future__ import annotations

import dis
import sys
from typing import Any

from dualflow.tracer.env_guards import MISSING
from dualflow.tracer.provenance import ENV_COLLECTION, OPAQUE, UNKNOWN

NULL: Any = type("Null", (), {"__repr__": lambda self: "<NULL>"})()
_NULL_AFTER = sys.version_info >= (3, 13)  # LOAD_GLOBAL / LOAD_ATTR push NULL after the value
_ATTR_METHOD_FLAG = sys.version_info >= (3, 12)  # LOAD_ATTR's low bit means "load a method"

# Instructions that leave the stack as it is.
NO_EFFECT = frozenset(
    {
        "NOP",
        "RESUME",
        "PRECALL",
        "CACHE",
        "EXTENDED_ARG",
        "KW_NAMES",
        "MAKE_CELL",
        "COPY_FREE_VARS",
        "JUMP_FORWARD",
        "JUMP_BACKWARD",
        "JUMP_BACKWARD_NO_INTERRUPT",
        "JUMP_ABSOLUTE",
        "JUMP",
        "JUMP_NO_INTERRUPT",
        "SETUP_FINALLY",
        "SETUP_WITH",
        "POP_BLOCK",
        "GEN_START",
        "NOT_TAKEN",
    }
)
# Instructions popping a fixed number of values and pushing one unknown result.
POP_PUSH = {
    "BINARY_OP": 2,
    "COMPARE_OP": 2,
    "IS_OP": 2,
    "CONTAINS_OP": 2,
    "UNARY_NEGATIVE": 1,
    "UNARY_POSITIVE": 1,
    "UNARY_NOT": 1,
    "UNARY_INVERT": 1,
    "TO_BOOL": 1,
    "BINARY_ADD": 2,
    "BINARY_SUBTRACT": 2,
    "BINARY_MULTIPLY": 2,
    "BINARY_TRUE_DIVIDE": 2,
    "BINARY_POWER": 2,
    "BINARY_MATRIX_MULTIPLY": 2,
    "GET_LEN": 1,
    "BINARY_SLICE": 3,
}
# Instructions that only pop.
POP_ONLY = {
    "POP_TOP": 1,
    "STORE_FAST": 1,
    "STORE_NAME": 1,
    "POP_JUMP_IF_FALSE": 1,
    "POP_JUMP_IF_TRUE": 1,
    "POP_JUMP_FORWARD_IF_FALSE": 1,
    "POP_JUMP_FORWARD_IF_TRUE": 1,
    "POP_JUMP_BACKWARD_IF_FALSE": 1,
    "POP_JUMP_BACKWARD_IF_TRUE": 1,
    "POP_JUMP_FORWARD_IF_NONE": 1,
    "POP_JUMP_FORWARD_IF_NOT_NONE": 1,
    "POP_JUMP_BACKWARD_IF_NONE": 1,
    "POP_JUMP_BACKWARD_IF_NOT_NONE": 1,
    "POP_JUMP_IF_NONE": 1,
    "POP_JUMP_IF_NOT_NONE": 1,
    "LIST_APPEND": 1,
    "SET_ADD": 1,
    "MAP_ADD": 2,
}
BUILDS = {"BUILD_TUPLE", "BUILD_LIST", "BUILD_SET", "BUILD_STRING", "BUILD_SLICE"}


class Instruction:
    """What the model needs of one instruction."""

    __slots__ = ("arg", "argval", "name")

    def __init__(self, name: str, arg: int | None, argval: Any) -> None:
        self.name, self.arg, self.argval = name, arg, argval


_CODES: dict[Any, dict[int, Instruction]] = {}


def instructions(code: Any) -> dict[int, Instruction]:
    """Offset -> instruction of a code object (cached per code object).

    Example:
        >>> ins = instructions((lambda: G).__code__)
        >>> sorted(i.name for i in ins.values())[0]
        'LOAD_GLOBAL'
    """
    table = _CODES.get(code)
    if table is None:
        if len(_CODES) > 4096:  # code objects of long-gone functions: start afresh
            _CODES.clear()
        table = {
            ins.offset: Instruction(ins.opname, ins.arg, ins.argval)
            for ins in dis.get_instructions(code)
        }
        _CODES[code] = table
    return table


class Method:
    """``holder.name`` loaded to be called (``LOAD_METHOD``): the call decides what it means."""

    __slots__ = ("holder", "name")

    def __init__(self, holder: Any, name: str) -> None:
        self.holder, self.name = holder, name


class MadeFunction:
    """A function the call made (``MAKE_FUNCTION``: a lambda, a comprehension, a generator
    expression): the model knows its code, so calling it is followed like any user function."""

    __slots__ = ("code",)

    def __init__(self, code: Any) -> None:
        self.code = code


class StackModel:
    """The known top of one frame's value stack (``values[-1]`` is the top)."""

    __slots__ = ("awaiting", "loop_exit", "opaque_locals", "returning_opaque", "values")

    def __init__(self) -> None:
        self.values: list[Any] = []
        self.awaiting = False  # the last instruction was a call whose result a return names
        self.opaque_locals: set[str] = set()  # locals holding a value the probe cannot name
        self.returning_opaque = False  # the frame returns a value the probe cannot name
        self.loop_exit: int | None = None  # FOR_ITER's target: there its iterator is gone

    def push(self, *values: Any) -> None:
        self.values.extend(values)

    def pop(self, count: int = 1) -> list[Any]:
        """The top ``count`` values (bottom first), UNKNOWN where the model knew nothing."""
        values = self.values
        if count > len(values):
            known = values[:]
            values.clear()
            return [UNKNOWN] * (count - len(known)) + known
        taken = values[len(values) - count :]
        del values[len(values) - count :]
        return taken

    def forget(self) -> None:
        self.values.clear()

    def holds_unnamed(self) -> bool:
        """Whether forgetting now would lose an opaque value or an environment collection."""
        return any(v is OPAQUE or v is ENV_COLLECTION for v in self.values)

    def copy(self, depth: int) -> None:
        values = self.values
        self.push(values[-depth] if depth <= len(values) else UNKNOWN)

    def swap(self, depth: int) -> None:
        values = self.values
        if depth <= len(values):
            values[-1], values[-depth] = values[-depth], values[-1]
        else:
            values.clear()

    def push_loaded(self, value: Any, with_null: bool) -> None:
        """Push what a LOAD_GLOBAL/LOAD_ATTR pushes, with the NULL some versions add."""
        if not with_null:
            self.push(value)
        elif _NULL_AFTER:
            self.push(value, NULL)
        else:
            self.push(NULL, value)


def global_has_null(ins: Instruction) -> bool:
    """Whether a LOAD_GLOBAL also pushes NULL (the low bit of its arg, Python 3.11+)."""
    return sys.version_info >= (3, 11) and bool((ins.arg or 0) & 1)


def attr_is_method(ins: Instruction) -> bool:
    """Whether a LOAD_ATTR loads a method to call (Python 3.12+ folds LOAD_METHOD into it)."""
    return _ATTR_METHOD_FLAG and bool((ins.arg or 0) & 1)


def call_parts(model: StackModel, argc: int) -> tuple[Any, Any, list[Any]]:
    """Pop a call's callable, its bound self (or NULL) and its arguments.

    Python 3.11-3.12 stack ``NULL, callable, args`` or ``method, self, args``; 3.13 stacks
    ``callable, NULL|self, args``. Returns ``(callee, self_or_NULL, args)``.
    """
    first, second, *args = model.pop(argc + 2)
    if _NULL_AFTER:
        return first, second, args
    if first is NULL:
        return second, NULL, args
    return first, second, args


def is_missing(value: Any) -> bool:
    return value is UNKNOWN or value is MISSING or value is NULL
