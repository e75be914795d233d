"""Lazy re-execution: a compiled function's Python runs at every call, its tensor ops as plans.

The safe path of ``@dualflow.compile`` (issue 35). When the fast path cannot vouch for a trace —
it consumed a value the environment probe cannot re-derive, the interpreter's bytecode is not
one the probe was tested on, a graph break such as ``print(loss)`` or ``.numpy()`` is in the
step, or guards keep failing — the function is not sent to eager for good: each call runs its
Python under the lazy recorder (``lazy_record``), so environment reads, Python side effects and
randomness are right by construction, and the ops it records run as cached plans keyed by their
structure (``lazy_plans``). A call is all-or-nothing like any compiled call: writes are committed
at the flushes with an undo log, and an error or Ctrl-C puts all of them back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from dualflow._pending import Pending
from dualflow._undo import recording
from dualflow.ops.dispatch import interpreting
from dualflow.tensor.core import Tensor
from dualflow.tracer import interrupts
from dualflow.tracer.lazy_plans import LazyPlans
from dualflow.tracer.lazy_record import LazyRecorder


def run_lazily(
    fn: Callable,
    args: tuple,
    kwargs: dict,
    plans: LazyPlans,
    finish: Callable[[], None] | None = None,
) -> Any:
    """``fn(*args, **kwargs)`` with its ops recorded and run through ``plans``, then ``finish()``
    (the closing collective vote, None when there is none); every write is undone if either
    raises.

    Example:
        >>> import dualflow
        >>> from dualflow import ops
        >>> w = dualflow.tensor([1.0, 2.0])
        >>> def step(x):
        ...     ops.assign(w, w * x)
        ...     return w.sum() + 1
        >>> plans = LazyPlans("O2")
        >>> [run_lazily(step, (2.0,), {}, plans).item() for _ in range(3)]
        [7.0, 13.0, 25.0]
        >>> plans.stats()
        {'segments': 3, 'plan_segments': 2, 'compiled': 1}
    """
    plans.call_steps = 0
    with recording() as log:
        recorder = LazyRecorder(plans, log)
        recorder.unlogged_end = finish is None
        try:
            with interpreting(recorder):
                result = fn(*args, **kwargs)
                recorder.finish()
            if finish is not None:
                finish()
        except BaseException:
            held = interrupts.hold()  # a second Ctrl-C must not stop the undo half way
            try:
                _compute_what_is_left(recorder)
                log.rollback()
            finally:
                if held:
                    interrupts.release()
            raise
    settle(result)
    return result


def _compute_what_is_left(recorder: LazyRecorder) -> None:
    """Give the call's surviving tensors their values (as eager's would have), before the undo;
    a failure here is the same failure again and must not hide the first."""
    recorder.unlogged_end = False  # these writes are undone next: save them first
    with contextlib.suppress(Exception):  # the call's own error is the one to raise
        recorder.finish()
    recorder.closed = True


def settle(result: Any, depth: int = 0) -> None:
    """Swap the ``Pending`` arrays of the result's tensors for the real arrays they stand for.

    Example:
        >>> settle((1, [2.0], {"a": None}))
    """
    if isinstance(result, Tensor):
        if type(result.raw_array) is Pending and result.raw_array.real is not None:
            result.raw_array = result.raw_array.real
        grad = result.raw_grad
        if grad is not None and type(grad.raw_array) is Pending and grad.raw_array.real is not None:
            grad.raw_array = grad.raw_array.real
    elif depth < 8 and isinstance(result, tuple | list):
        for item in result:
            settle(item, depth + 1)
    elif depth < 8 and isinstance(result, dict):
        for item in result.values():
            settle(item, depth + 1)
