"""Execution modes of the bench: how a workload's step is run (eager, or compiled).

Each mode turns the built step into the callable to time and, after the run, reports its compile
time and steps per call; ``final_state`` collects what "results match eager" compares.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import dualflow
from dualflow.autograd.eager import EAGER
from dualflow.bench.harness import Measurement, held_after_first_calls
from dualflow.device import Device
from dualflow.ops.dispatch import interpreting
from dualflow.ops.registry import OpDef

# compiled-lazy: off the fast path from the first call, as a function whose traces failed: lazy
# re-execution (its Python at every call, ops as plans), or eager calls where they measure faster
MODES = ("eager", "compiled-O0", "compiled", "compiled-lazy")
# Results "match" when either bound holds: float32 reassociation in fused kernels gives errors
# that scale with the values' magnitude, so large outputs need the relative one.
MATCH_ABS = 1e-4
MATCH_REL = 1e-4


def prepare(
    mode: str, step: Callable[[], Any], options: dict[str, Any] | None = None
) -> Callable[[], Any]:
    """The callable to time for ``mode``; ``options`` are ``compile``'s settings a workload asks
    for in its compiled modes (its ``"compile"`` entry, e.g. ``{"memory_budget": 0.5}``).

    Example:
        >>> prepare("eager", print) is print
        True
        >>> prepare("compiled", print, {"memory_budget": 0.5}).passes[-1]
        'remat=0.5'
    """
    options = options or {}
    if mode == "eager":
        return step
    if mode == "compiled-O0":
        return dualflow.compile(step, passes="O0", **options)
    if mode == "compiled":
        return dualflow.compile(step, **options)
    if mode == "compiled-lazy":
        fn = dualflow.compile(step, **options)
        fn._lazy_reason = "the bench's compiled-lazy mode"  # what _give_up sets, without a warning
        return fn
    if mode.startswith("compiled[") and mode.endswith("]"):  # --passes a,b
        return dualflow.compile(step, passes=mode[len("compiled[") : -1], **options)
    raise ValueError(f"unknown mode {mode!r}; choose from {MODES}")


def compile_report(fn: Callable[[], Any]) -> tuple[float | None, int | None]:
    """(compile ms, kernels per call) of a compiled step; (None, None) when eager."""
    if not isinstance(fn, dualflow.tracer.CompiledFunction):
        return None, None
    if fn._lazy_reason is not None:  # lazy re-execution: its segments' plans, the last call's
        plans = fn._lazy_plans
        return plans.compile_seconds * 1e3, plans.call_steps
    if not fn.history:
        return None, None
    trace = fn.history[-1]
    return fn.stats().compile_seconds * 1e3, trace.plan.steps


def held_bytes(fn: Callable[[], Any]) -> int:
    """Bytes a compiled step's plans keep between calls (their planned buffers, forward and
    backward); a step's measured peak only sees what it allocates, so these are added to it."""
    if not isinstance(fn, dualflow.tracer.CompiledFunction):
        return 0
    plans = [t.plan for t in fn.history] + [t.backward.plan for t in fn.history if t.backward]
    return sum(plan.held_bytes for plan in plans)


def fresh_held(workload: Any, mode: str, seed: int, device: Device) -> int | None:
    """Bytes a fresh compiled step of ``workload`` keeps after its first calls (issue 36), for
    the workloads that ask (``held``); None otherwise.

    Example:
        >>> from dualflow.bench.workloads import WORKLOADS
        >>> from dualflow.device import CPU
        >>> fresh_held(WORKLOADS["mlp"], "compiled", 0, CPU) is None
        True
    """
    if mode == "eager" or not workload.held:
        return None
    fresh = workload.build(np.random.default_rng(seed), device)  # before measuring
    step = prepare(mode, fresh["step"], fresh.get("compile"))
    return held_after_first_calls(step, device=device)


class _CountingInterpreter:
    # Forwards every op to the eager interpreter, counting them: eager runs one kernel per op
    # (forward, backward and update alike), which is what a compiled plan's steps replace.
    hooks = None  # not a tracing interpreter (dispatch.tracing())

    def __init__(self) -> None:
        self.calls = 0

    def apply(self, op: OpDef, args: tuple, attrs: dict[str, Any]) -> Any:
        self.calls += 1
        return EAGER.apply(op, args, attrs)


def count_eager_ops(step: Callable[[], Any]) -> tuple[Any, int]:
    """Run an eager ``step`` once; returns its result and how many ops it dispatched.

    Example:
        >>> x = dualflow.tensor([1.0, 2.0])
        >>> count_eager_ops(lambda: (x * 2 + 1).sum())[1]
        3
    """
    counter = _CountingInterpreter()
    with interpreting(counter):
        result = step()
    return result, counter.calls


def final_state(built: dict[str, Any], last_output: Any) -> list[np.ndarray]:
    """The arrays that must agree across modes: every parameter, then the last output (each
    tensor of it when the step returns a tuple or list, e.g. gradients).

    Example:
        >>> x = dualflow.tensor([1.0])
        >>> len(final_state({"params": [x]}, (x, x))), len(final_state({}, None))
        (3, 0)
    """
    arrays = [p.numpy().astype(np.float64) for p in built.get("params", [])]
    outputs = last_output if isinstance(last_output, tuple | list) else [last_output]
    arrays += [t.numpy().astype(np.float64) for t in outputs if isinstance(t, dualflow.Tensor)]
    return arrays


def max_difference(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    """Largest absolute elementwise difference between two lists of arrays.

    Example:
        >>> max_difference([np.ones(2)], [np.array([1.0, 1.5])])
        0.5
    """
    return max((float(np.max(np.abs(x - y))) for x, y in zip(a, b) if x.size), default=0.0)


def relative_difference(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    """Largest ``max|x - y| / max|x|`` over the pairs of arrays (``a`` is the reference).

    Each array is scaled by its own largest magnitude, not elementwise, so values near zero do
    not turn rounding noise into huge ratios.

    Example:
        >>> relative_difference([np.array([2.0, 4.0])], [np.array([2.0, 5.0])])
        0.25
    """
    return max(
        (
            float(np.max(np.abs(x - y)) / max(float(np.max(np.abs(x))), 1e-30))
            for x, y in zip(a, b)
            if x.size
        ),
        default=0.0,
    )


def compare(
    row: Measurement, eager: Measurement, eager_state: list[np.ndarray], state: list[np.ndarray]
) -> None:
    """Fill ``row``'s differences, match verdict, speedup and memory ratio against eager's.

    When either row's timings are noisy (spread wider than the median) the speedup is left out
    and ``row.noisy`` set: the table and JSON flag it instead of a bogus ratio.

    Example:
        >>> eager = Measurement("w", "eager", 2.0, 2.0, 2.0, 1, 100)
        >>> row = Measurement("w", "compiled", 1.0, 1.0, 1.0, 1, 50)
        >>> compare(row, eager, [np.ones(2)], [np.ones(2)])
        >>> (row.matches, row.speedup, row.mem_ratio)
        (True, 2.0, 0.5)
        >>> eager.noisy = True; compare(row, eager, [np.ones(2)], [np.ones(2)])
        >>> (row.speedup, row.noisy)
        (None, True)
    """
    row.max_diff = max_difference(eager_state, state)
    row.max_rel_diff = relative_difference(eager_state, state)
    row.matches = row.max_diff <= MATCH_ABS or row.max_rel_diff <= MATCH_REL
    row.noisy = row.noisy or eager.noisy
    row.speedup = None if row.noisy else eager.ms_median / row.ms_median
    row.mem_ratio = row.peak_bytes / max(eager.peak_bytes, 1)
