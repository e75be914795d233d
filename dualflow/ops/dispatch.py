"""THE dispatch point: ``apply(op, *args, **attrs)`` hands every op call to the current interpreter.

The interpreter (eager, or the tracer's) lives in a contextvar, the one slot: ``tracing()`` reads
the tracing interpreter's hooks from it too. This module sits in ``ops`` rather than ``autograd``
so that op functions can call it without importing the autograd layer; the eager interpreter is
the default, which ``dualflow/__init__`` installs (``dualflow/_installed.py``): the first call
made with no interpreter active loads it.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any, Protocol

from dualflow._config import AUTOCAST_THREADS, config
from dualflow._installed import installed
from dualflow.ops.registry import OpDef
from dualflow.ops.tracing_hooks import TracingHooks


class Interpreter(Protocol):
    """Something that can execute one op call; ``hooks`` is the interpreter itself when it
    traces (Tensor, Module and the engine report to it), None for any other (op counters)."""

    hooks: TracingHooks | None

    def apply(self, op: OpDef, args: tuple, attrs: dict[str, Any]) -> Any: ...


def _bootstrap_apply(op: OpDef, args: tuple, attrs: dict[str, Any]) -> Any:
    # The first op call of a process: the interpreter dualflow/__init__ installed (the eager
    # one, in a layer above) becomes the default, then runs the call.
    interpreter = installed("interpreter")
    if _default_apply is _bootstrap_apply:  # not while something stands in for the default
        set_default_interpreter(interpreter)
    return interpreter.apply(op, args, attrs)


_default_apply: Any = _bootstrap_apply  # replaced by the eager interpreter's ``apply``
current_interpreter: contextvars.ContextVar[Interpreter | None] = contextvars.ContextVar(
    "dualflow_interpreter", default=None
)
_get_current = current_interpreter.get


def tracing() -> TracingHooks | None:
    """The hooks of the tracing interpreter running on this thread, None when not tracing.

    The same contextvar as the interpreter: a trace is seen by the code it runs, never by
    another thread's (a new thread starts with an empty context) nor after it ended.

    Example:
        >>> tracing() is None
        True
    """
    interpreter = _get_current()
    return None if interpreter is None else interpreter.hooks


def reading(array: Any, writable: bool) -> None:
    """A tensor's data is about to be read outside an op (``.numpy()``, ``.item()``...): lazy
    re-execution runs what it has recorded first, so the read sees eager's values.

    Example:
        >>> import numpy as np
        >>> reading(np.zeros(1), False)  # not recording: nothing to do
    """
    interpreter = _get_current()
    if interpreter is not None and interpreter.hooks is None:
        before_read = getattr(interpreter, "before_read", None)
        if before_read is not None:
            before_read(array, writable)


def set_default_interpreter(interpreter: Interpreter) -> None:
    """Install the interpreter used when no other is active (the eager one)."""
    global _default_apply
    _default_apply = interpreter.apply


def run_default(op: OpDef, args: tuple, attrs: dict[str, Any]) -> Any:
    """Run one call through the default interpreter (the eager one), whatever is active: what
    an interpreter stacked above it (forward-mode AD) hands a call on to.

    Example:
        >>> import numpy as np
        >>> from dualflow.ops import OPS
        >>> run_default(OPS["add"], (np.ones(2), np.ones(2)), {}).tolist()
        [2.0, 2.0]
    """
    return _default_apply(op, args, attrs)


def apply(op: OpDef, *args: Any, **attrs: Any) -> Any:
    """Run ``op`` on ``args`` (Tensors, arrays, scalars) with keyword ``attrs``.

    Example:
        >>> import dualflow
        >>> from dualflow.ops import OPS
        >>> apply(OPS["add"], 1.0, 2.0).item()
        3.0
    """
    # dualflow.amp.autocast: a process-wide set read first, so eager ops pay ~nothing when off
    if AUTOCAST_THREADS and op.autocast is not None and config.autocast is not None:
        from dualflow.ops.autocast import cast_for  # noqa: PLC0415 - a cycle: it calls apply

        args = cast_for(op, args, config.autocast)
    interpreter = _get_current()
    if interpreter is None:  # eager fast path: one call less per op
        return _default_apply(op, args, attrs)
    return interpreter.apply(op, args, attrs)


@contextlib.contextmanager
def interpreting(interpreter: Interpreter) -> Iterator[None]:
    """Run the body with ``interpreter`` as the current one (used by the tracer)."""
    token = current_interpreter.set(interpreter)
    try:
        yield
    finally:
        current_interpreter.reset(token)
