"""Provenance of the values the environment probe cannot name (issue 35: the unknown is safe).

The probe's stack model holds, for each slot of a frame's value stack, either the value itself
(named: reads through it are guarded when it came from the environment) or one of these marks:

- ``UNKNOWN``: not named, but derived only from named values, literals and the call's own data,
  and holding no object of the environment. Reads through it need no guard.
- ``TRUSTED``: a result of dualflow's own code (a tensor, a Module, a plain value): dualflow reads
  the environment only through Module/Optimizer versions and the tracer's hooks.
- ``ENV_COLLECTION``: a new collection holding objects of the environment (``sorted(objs)``,
  ``d.values()``). Iterating it is fine (each element reaches a local by name and is known);
  reading an element or attribute through it is not.
- ``OPAQUE``: anything else: the result of code the probe does not model (a C function, the
  standard library, a property it cannot follow) applied to the environment. A trace that lets
  an opaque value reach an op, a branch, a store or a call fails closed: its value could change
  between calls with no guard to notice.
"""

from __future__ import annotations

import builtins
import collections
import functools
import math
import operator
import types
from typing import Any

import numpy as np

from dualflow.tracer.env_guards import is_value, is_versioned


def _mark(name: str) -> Any:
    return type(name, (), {"__repr__": lambda self: f"<{name.lower()}>"})()


UNKNOWN: Any = _mark("Unknown")
TRUSTED: Any = _mark("Trusted")
ENV_COLLECTION: Any = _mark("EnvCollection")
OPAQUE: Any = _mark("Opaque")
MARKS = (UNKNOWN, TRUSTED, ENV_COLLECTION, OPAQUE)

# Builtins whose result is a plain value computed from their arguments (no object of theirs).
PLAIN_RESULT = frozenset(
    {
        builtins.abs,
        builtins.bool,
        builtins.float,
        builtins.int,
        builtins.complex,
        builtins.str,
        builtins.repr,
        builtins.format,
        builtins.round,
        builtins.len,
        builtins.hash,
        builtins.isinstance,
        builtins.issubclass,
        builtins.callable,
        builtins.divmod,
        builtins.pow,
        builtins.ord,
        builtins.chr,
        builtins.hex,
        builtins.oct,
        builtins.bin,
        builtins.any,
        builtins.all,
        builtins.sum,
        builtins.range,
        builtins.slice,
        builtins.id,
    }
)
# Builtins returning a new collection of their arguments' elements.
COLLECTION_RESULT = frozenset(
    {
        builtins.list,
        builtins.tuple,
        builtins.set,
        builtins.frozenset,
        builtins.dict,
        builtins.sorted,
        builtins.reversed,
        builtins.enumerate,
        builtins.zip,
        builtins.iter,
        builtins.map,
        builtins.filter,
        collections.OrderedDict,
        collections.defaultdict,
        collections.deque,
        collections.Counter,
        types.SimpleNamespace,
        functools.partial,
    }
)
# Builtins returning one of their arguments' elements (or an argument itself).
ELEMENT_RESULT = frozenset({builtins.max, builtins.min, builtins.next})
_PLAIN_MODULES = (math, operator)
_PLAIN_OPERATORS = frozenset(
    {
        operator.add,
        operator.sub,
        operator.mul,
        operator.truediv,
        operator.floordiv,
        operator.mod,
        operator.pow,
        operator.neg,
        operator.pos,
        operator.abs,
        operator.eq,
        operator.ne,
        operator.lt,
        operator.le,
        operator.gt,
        operator.ge,
        operator.not_,
        operator.truth,
        operator.index,
    }
)
_NUMPY_SCALARS = (np.generic, np.dtype)
# where the probe's marks (UNKNOWN, MISSING, NULL, Method, MadeFunction...) are defined
_PROBE_MODULES = frozenset(
    f"dualflow.tracer.{name}" for name in ("provenance", "stack_model", "env_guards", "calls")
)


def is_plain(value: Any) -> bool:
    """Whether ``value`` carries nothing of the environment by identity: an immutable value,
    a tensor (the tracer follows tensors itself) or a versioned Module/Optimizer.

    Example:
        >>> is_plain(2.0), is_plain((1, "a")), is_plain([1]), is_plain(UNKNOWN)
        (True, True, False, False)
    """
    if is_value(value):
        return True
    return is_trusted_object(value)


def is_trusted_object(value: Any) -> bool:
    """Whether ``value`` is one of dualflow's own objects (a Tensor, a Module, an Optimizer,
    a numpy-array argument's stand-in): its reads go through the tracer's hooks and versions."""
    if is_versioned(value):
        return True
    module = getattr(type(value), "__module__", "") or ""
    if module in _PROBE_MODULES:  # the probe's own marks and stack entries
        return False
    return module == "dualflow" or module.startswith("dualflow.")


def is_trusted_callable(callee: Any) -> bool:
    """Whether ``callee`` is dualflow's own code (a function, class or bound method)."""
    if is_trusted_object(callee):  # calling a Module (its forward is followed from there)
        return True
    owner = getattr(callee, "__self__", None)
    if owner is not None and not isinstance(owner, types.ModuleType) and is_plain(owner):
        return True
    module = getattr(callee, "__module__", None) or ""
    return module == "dualflow" or module.startswith("dualflow.")


def is_plain_callable(callee: Any) -> bool:
    """Builtins, ``math`` functions, arithmetic ``operator`` functions and numpy scalar types:
    pure functions whose result is a plain value when their arguments are plain."""
    try:
        if callee in PLAIN_RESULT or callee in _PLAIN_OPERATORS:
            return True
    except TypeError:  # unhashable
        return False
    if isinstance(callee, types.BuiltinFunctionType) and getattr(callee, "__self__", None) is math:
        return True
    return isinstance(callee, type) and issubclass(callee, _NUMPY_SCALARS)


def elements_plain(container: Any) -> bool:
    """Whether every element (dict values and keys too) of a concrete container is plain, or a
    function, class or module (stable objects a call may pick by an unknown index)."""
    items = container.items() if isinstance(container, dict) else container
    for element in items:
        parts = element if isinstance(container, dict) else (element,)
        for part in parts:
            if not (is_plain(part) or _stable(part)):
                return False
    return True


def _stable(value: Any) -> bool:
    return isinstance(value, types.FunctionType | types.BuiltinFunctionType | type)


def combine(values: list[Any]) -> Any:
    """The provenance of a value derived from ``values`` by code that reads them only (an
    operator, a container display): the worst of theirs.

    Example:
        >>> combine([1, UNKNOWN]) is UNKNOWN, combine([OPAQUE, 2]) is OPAQUE
        (True, True)
    """
    if any(v is OPAQUE for v in values):
        return OPAQUE
    if any(v is ENV_COLLECTION or _holds_environment(v) for v in values):
        return ENV_COLLECTION
    if values and all(v is TRUSTED or is_trusted_object(v) for v in values):
        return TRUSTED
    return UNKNOWN


def _holds_environment(value: Any) -> bool:
    """A concrete container (or object) whose elements may be objects of the environment."""
    if any(value is mark for mark in MARKS) or is_plain(value) or _stable(value):
        return False
    if isinstance(value, list | tuple | set | frozenset | dict):
        return not elements_plain(value)
    return not isinstance(value, types.ModuleType)
