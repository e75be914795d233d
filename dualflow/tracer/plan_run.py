"""One call served by a stored trace: run its plan, then commit everything at once.

``run_trace`` feeds the plan the call's arrays and the captured state, and — only when every
guard passed — writes the state updates, ``.grad`` slots and assigned arguments, replays the
Python side effects and wires outputs to the backward plan. Interrupts (Ctrl-C) that arrive
while a call commits are held until it has committed, so a call leaves all old or all new state.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from dualflow._config import config, enable_grad
from dualflow.tensor.core import Tensor
from dualflow.tracer import interrupts
from dualflow.tracer.autodiff import connect, released_node
from dualflow.tracer.collective_agreement import EAGER_RUN
from dualflow.tracer.function_names import caller_level
from dualflow.tracer.pytree import flatten
from dualflow.tracer.signature import Flat
from dualflow.tracer.trace import Trace, is_tensor


class GuardFailed:
    """``run_trace``'s answer when a guard failed: nothing was written; ``node`` says which."""

    def __init__(self, node: Any, seen: Any = None) -> None:
        self.node, self.seen = node, seen


class StepFailed:
    """``run_trace``'s answer when a plan step raised and nothing was written (no state array
    was written in place before it): the call can re-run eagerly from the state it found."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def rerun_eagerly(self, eagerly: Callable[[], Any], stats: Any, name: str) -> Any:
        """The call re-run by ``eagerly`` (all or nothing), so it raises eager's very error
        (its text and line) whatever the plan knew of it: an index past a new batch's rows, a
        label out of range. Where eager does not raise, the plan was wrong to: eager's result
        is returned, with a warning naming the step's error. ``stats``: the function's counters.

        Example:
            >>> from dualflow.tracer.stats import Stats
            >>> StepFailed(ValueError("x")).rerun_eagerly(lambda: 1 / 0, Stats(), "f")
            Traceback (most recent call last):
            ZeroDivisionError: division by zero
        """
        stats.step_errors += 1
        stats.eager_fallbacks += 1
        result = eagerly()
        warnings.warn(
            f"a compiled step of {name} raised {type(self.error).__name__}: {self.error}\n"
            "where the eager call did not; the call ran eagerly (please report this)",
            RuntimeWarning,
            stacklevel=caller_level(),
        )
        return result


def run_trace(
    trace: Trace,
    flat: Flat,
    args: tuple,
    kwargs: dict,
    compiled: Any,
    history: tuple = ((), ()),
    lock: Any = None,
) -> Any:
    """The call's result from ``trace``'s plan, or ``GuardFailed`` or ``StepFailed`` (nothing
    written then).

    ``compiled``: the CompiledFunction (its ``fn`` re-runs the call for create_graph);
    ``history``: the saved arrays of the arguments' tapes the graph reads, and those tape nodes.
    """
    inputs = [leaf.raw_array if isinstance(leaf, Tensor) else leaf for leaf in flat.leaves]
    inputs += history[0]
    state = [ref.read() for ref in trace.checks.refs]
    connected = trace.backward is not None and config.grad_enabled
    # the state before the call, for create_graph's replay (taken first: the plan may
    # write donated updates into the state arrays while it runs)
    before = [state[slot].copy() for slot in trace.update_slots] if connected else []
    held = trace.commits and interrupts.hold()
    try:
        try:
            result = compiled.agreement.run_plan(trace, inputs, state)  # issue 15
        except Exception as exc:  # a step's error: eager's own text comes from re-running
            if compiled.agreement.comms or not trace.plan.left_state_untouched(exc):
                raise  # other ranks are in the plan, or a state array holds new values
            return StepFailed(exc)
        if result is EAGER_RUN:  # another rank runs this call eagerly: nothing was committed
            return EAGER_RUN
        if result.failed_guard is not None:
            return GuardFailed(result.failed_guard, result.seen)
        outputs, residuals = commit(trace, flat, state, result)
        if trace.history is not None and trace.history.release:
            for node in history[1]:  # as the eager backward did: the tape is used up
                node.release()
        if trace.replay:
            trace.replay.apply(outputs, flat.leaves)
    finally:
        if held:
            interrupts.release()
    if connected:
        replay = _rerun(compiled.fn, args, kwargs, trace, state, before)
        refs = trace.checks.refs
        connect(trace.backward, outputs, flat.leaves, refs, residuals, replay, lock)
    return trace.build_result([outputs[k] for k in trace.leaf_index])


def commit(trace: Trace, flat: Flat, state: list[Any], result: Any) -> tuple[list, list]:
    """Every guard passed: write state, arguments and ``.grad`` slots (all or nothing).

    Returns the trace's outputs as tensors (user outputs first, then tensors its side effects
    store) and the residuals a backward graph reads.
    """
    arrays = iter(result.outputs)
    outputs = [Tensor.wrap(next(arrays), None, 0, False) for _ in range(trace.n_outputs)]
    for index in (*trace.const_outputs, *trace.state_outputs):  # not shared with the caller /
        outputs[index].raw_array = outputs[index].raw_array.copy()  # not overwritten by the commit
    for slot, new in zip(trace.update_slots, result.updates):
        if new is not state[slot]:  # a donated update was written in place by the plan
            state[slot][...] = new
    for index, (kind, where) in trace.identity_outputs.items():  # the object itself, as eager
        outputs[index] = flat.leaves[where] if kind == "input" else trace.checks.refs[where].tensor
    for index in trace.released_outputs:  # eager: requires grad, its tape consumed inside
        outputs[index].creator = released_node()
        outputs[index].requires_grad = True
    for slot in trace.grad_owners:
        _grad_owner(slot, flat).raw_grad = Tensor.wrap(next(arrays), None, 0, False)
    for position in trace.input_updates:
        flat.leaves[position].raw_array[...] = next(arrays)
    for slot in trace.grads_to_none:
        _grad_owner(slot, flat).raw_grad = None
    return outputs, list(arrays)


def _grad_owner(slot: tuple[str, Any], flat: Flat) -> Tensor:
    kind, where = slot
    return flat.leaves[where] if kind == "input" else where


def _rerun(fn: Any, args: tuple, kwargs: dict, trace: Trace, state: list, before: list) -> Any:
    """An eager re-run of this call with its state writes undone: for create_graph."""

    def replay() -> list[Tensor]:
        after = [state[slot].copy() for slot in trace.update_slots]
        for slot, old in zip(trace.update_slots, before):
            state[slot][...] = old
        try:
            with enable_grad():
                out = fn(*args, **kwargs)
        finally:
            for slot, new in zip(trace.update_slots, after):
                state[slot][...] = new
        return flatten(out, is_leaf=is_tensor)[0]

    return replay
