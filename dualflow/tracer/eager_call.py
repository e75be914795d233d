"""An eager call with a compiled call's promise: all old or all new state (issue 36).

A compiled function that runs its Python eagerly (after ``max_traces``, a fail-closed event, or
another rank's eager vote) runs it with an undo log (``dualflow._undo``): the eager interpreter
does the work, every ``assign`` saves its target first, and the autograd engine, ``Tensor.grad``,
``Module.train`` and ``Optimizer.step`` save what they change. An error or Ctrl-C puts it all
back, with interrupts held while it does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dualflow._undo import UndoLog, recording
from dualflow.autograd.eager import EAGER
from dualflow.ops.dispatch import interpreting
from dualflow.ops.registry import OpDef
from dualflow.tracer import interrupts


class _Undoing:
    """The eager interpreter, saving the target of every state write first (not tracing)."""

    hooks = None

    def __init__(self, log: UndoLog) -> None:
        self.log = log

    def apply(self, op: OpDef, args: tuple, attrs: dict[str, Any]) -> Any:
        if op.state_write:
            self.log.array(getattr(args[0], "raw_array", args[0]))
        return EAGER.apply(op, args, attrs)


def run_undoably(fn: Callable, args: tuple, kwargs: dict, finish: Callable[[], None]) -> Any:
    """``fn(*args, **kwargs)`` then ``finish()`` (the closing collective vote), undoing every
    write the call made if either raises.

    Example:
        >>> import dualflow
        >>> from dualflow import ops
        >>> w = dualflow.tensor([1.0])
        >>> def step():
        ...     ops.assign(w, w * 5)
        ...     raise ValueError("bad batch")
        >>> try:
        ...     run_undoably(step, (), {}, lambda: None)
        ... except ValueError:
        ...     w.tolist()
        [1.0]
    """
    with recording() as log, interpreting(_Undoing(log)):
        try:
            result = fn(*args, **kwargs)
            finish()
            return result
        except BaseException:
            held = interrupts.hold()  # a second Ctrl-C must not stop the undo half way
            try:
                log.rollback()
            finally:
                if held:
                    interrupts.release()
            raise
