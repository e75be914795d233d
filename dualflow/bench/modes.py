"""Execution modes of the bench: how a workload's step is run (eager, or compiled).

Each mode turns the built step into the callable to time and, after the run, reports its compile
time and steps per call; ``final_state`` collects what "results match eager" compares.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import dualflow

MODES = ("eager", "compiled-O0", "compiled")


def prepare(mode: str, step: Callable[[], Any]) -> Callable[[], Any]:
    """The callable to time for ``mode``.

    Example:
        >>> prepare("eager", print) is print
        True
    """
    if mode == "eager":
        return step
    if mode == "compiled-O0":
        return dualflow.compile(step, passes="O0")
    if mode == "compiled":
        return dualflow.compile(step)
    if mode.startswith("compiled[") and mode.endswith("]"):  # --passes a,b
        return dualflow.compile(step, passes=mode[len("compiled[") : -1])
    raise ValueError(f"unknown mode {mode!r}; choose from {MODES}")


def compile_report(fn: Callable[[], Any]) -> tuple[float | None, int | None]:
    """(compile ms, kernels per call) of a compiled step; (None, None) when eager."""
    if not isinstance(fn, dualflow.tracer.CompiledFunction) or not fn.history:
        return None, None
    trace = fn.history[-1]
    return fn.stats().compile_seconds * 1e3, trace.plan.steps


def final_state(built: dict[str, Any], last_output: Any) -> list[np.ndarray]:
    """The arrays that must agree across modes: every parameter, then the last output."""
    arrays = [p.numpy().astype(np.float64) for p in built.get("params", [])]
    if isinstance(last_output, dualflow.Tensor):
        arrays.append(last_output.numpy().astype(np.float64))
    return arrays


def max_difference(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    """Largest absolute elementwise difference between two lists of arrays.

    Example:
        >>> max_difference([np.ones(2)], [np.array([1.0, 1.5])])
        0.5
    """
    return max((float(np.max(np.abs(x - y))) for x, y in zip(a, b) if x.size), default=0.0)
