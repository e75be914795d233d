"""The undo log of an eager call that must be all-or-nothing (issue 36): a compiled function that
runs its Python eagerly (after a fallback) promises what its plan runs promise, all old or all
new state. While a log is current on this thread, the writes an eager training step makes are
saved once before their first change — arrays written by ``assign`` (parameters, optimizer
buffers, batch-norm statistics, RNG state), ``.grad`` slots, optimizers' Python state, modules'
training flags — and ``rollback()`` puts them back. Writers ask ``current()`` (a contextvar
read): no log, nothing to do.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

_LOG: contextvars.ContextVar[UndoLog | None] = contextvars.ContextVar("dualflow_undo", default=None)
current = _LOG.get


class UndoLog:
    """What one call changed, each place saved before its first change."""

    def __init__(self) -> None:
        self.arrays: dict[int, tuple[Any, Any]] = {}  # id(root array) -> (array, copy)
        self.grads: dict[int, tuple[Any, Any]] = {}  # id(tensor) -> (tensor, old .raw_grad)
        self.points: dict[int, Any] = {}  # id(versioned object) -> its restore function
        self.flags: dict[int, tuple[Any, Any]] = {}  # id(module) -> (module, old training)

    def array(self, array: Any) -> None:
        """``array`` (or the array it views) is about to be written in place."""
        while getattr(array, "base", None) is not None:
            array = array.base
        if id(array) not in self.arrays:
            self.arrays[id(array)] = (array, array.copy())

    def grad(self, owner: Any) -> None:
        """``owner.grad`` is about to be set."""
        if id(owner) not in self.grads:
            self.grads[id(owner)] = (owner, owner.raw_grad)

    def restore_point(self, owner: Any) -> None:
        """``owner`` (an optimizer) is about to change its Python state."""
        if id(owner) not in self.points:
            self.points[id(owner)] = owner._rollback_point()

    def modes(self, modules: list[Any]) -> None:
        """``training`` of ``modules`` is about to be set."""
        for module in modules:
            self.flags.setdefault(id(module), (module, getattr(module, "training", None)))

    def rollback(self) -> None:
        """Put every saved place back as it was before the call."""
        for restore in reversed(list(self.points.values())):
            restore()
        for module, flag in self.flags.values():
            object.__setattr__(module, "training", flag)
        for owner, grad in self.grads.values():
            owner.raw_grad = grad
        for array, saved in self.arrays.values():
            array[...] = saved


@contextlib.contextmanager
def recording() -> Iterator[UndoLog]:
    """Make a new log current on this thread for the body.

    Example:
        >>> import numpy as np
        >>> a = np.zeros(2)
        >>> with recording() as log:
        ...     log.array(a); a[0] = 5.0
        >>> log.rollback(); a.tolist()
        [0.0, 0.0]
    """
    log = UndoLog()
    token = _LOG.set(log)
    try:
        yield log
    finally:
        _LOG.reset(token)
