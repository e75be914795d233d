"""An eager call with a compiled call's promise: all old or all new state (issue 36).

A compiled function that runs its Python eagerly (after ``max_traces``, a fail-closed event, or
another rank's eager vote) runs it with an undo log (``dualflow._undo``) current: the eager
interpreter does the work and saves every ``assign``'s target first (no interpreter of its own:
one cost ~8% of a step of tiny ops), and the autograd engine, ``Tensor.grad``, ``Module.train``
and ``Optimizer.step`` save what they change. An error or Ctrl-C puts it all back, with
interrupts held while it does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dualflow._undo import recording
from dualflow.tracer import interrupts


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
    with recording() as log:  # the eager interpreter saves each state write's target first
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
