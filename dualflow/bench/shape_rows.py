"""The table rows of a variable-shape workload: each mode runs the same passes over its sizes.

A step of these workloads is one pass over the fixed size sequence (``peers.shape_sizes``): each
call gets the next size. Every mode builds its state afresh and runs one untimed pass (a compiled
function traces, retraces or goes symbolic there), then ``repeats`` timed passes and one call at
the largest size under the memory probe. ``compiled-static`` runs static-shape plans of the same
sizes (``dynamic=False``, a trace per size made in two untimed passes) so that ``static_ratio``
can compare every call with the static plan of its own size; ``compiled[exact]`` must be bit for
bit the eager results (``passes="exact"``).
"""

from __future__ import annotations

import inspect
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

import dualflow
from dualflow.bench.harness import Measurement, peak_memory
from dualflow.bench.modes import compare, compile_report, final_state, held_bytes
from dualflow.device import CPU, Device

SHAPE_MODES = ("eager", "compiled", "compiled[exact]", "compiled-static")
Builder = Callable[..., dict[str, Any]]


def static_options(distinct: int) -> dict[str, Any]:
    """``compile``'s settings for static-shape plans of ``distinct`` sizes: room for a trace per
    size (and a single-use first one) and ``dynamic=False`` where ``compile`` has it.

    Example:
        >>> static_options(3)["max_traces"]
        8
    """
    options: dict[str, Any] = {"max_traces": 2 * distinct + 2}
    if "dynamic" in inspect.signature(dualflow.compile).parameters:  # issue 39's setting
        options["dynamic"] = False
    return options


def prepare(mode: str, fn: Callable[..., Any], distinct: int) -> Callable[..., Any]:
    """The function a mode calls: ``fn`` itself, or ``fn`` compiled as the mode says.

    Example:
        >>> "fuse_exact" in prepare("compiled[exact]", print, 2).passes, prepare("eager", print, 2)
        (True, <built-in function print>)
    """
    if mode == "eager":
        return fn
    if mode == "compiled":
        return dualflow.compile(fn)
    if mode == "compiled[exact]":
        return dualflow.compile(fn, passes="exact")
    if mode == "compiled-static":
        return dualflow.compile(fn, **static_options(distinct))
    raise ValueError(f"unknown mode {mode!r}; choose from {SHAPE_MODES}")


def _wait_for_kernels() -> None:
    # kernels the numba worker still compiles run a slow evaluator: not the step at speed
    worker = sys.modules.get("dualflow.kernels.numba.compile_worker")
    if worker is not None and worker.pending():
        worker.wait()


def run_passes(
    fn: Callable[..., Any], calls: list[tuple], passes: int, warmup: int, device: Device = CPU
) -> tuple[np.ndarray, list[Any]]:
    """Seconds of every call of ``passes`` timed passes over ``calls`` (a ``passes x calls``
    array) after ``warmup`` untimed ones; and every call's output, warm-up passes included.

    Example:
        >>> times, outs = run_passes(lambda x: x + 1, [(1,), (2,)], passes=2, warmup=1)
        >>> times.shape, outs
        ((2, 2), [2, 3, 2, 3, 2, 3])
    """
    wait = lambda: None  # noqa: E731 - a CPU's calls are synchronous
    if device.kind != "cpu":
        from dualflow.bench.devices import synchronizer  # noqa: PLC0415 - needs cupy

        wait = synchronizer(device)
    outputs = [fn(*args) for _ in range(warmup) for args in calls]
    _wait_for_kernels()
    times = np.empty((passes, len(calls)))
    for p in range(passes):
        for i, args in enumerate(calls):
            wait()
            start = time.perf_counter()
            outputs.append(fn(*args))
            wait()
            times[p, i] = time.perf_counter() - start
    return times, outputs


def _largest(calls: list[tuple]) -> tuple:
    # the call whose first argument is largest: the memory probe's
    return max(calls, key=lambda args: args[0].numel())


def measure_mode(
    name: str, build: Builder, mode: str, passes: int, seed: int, device: Device = CPU
) -> tuple[Measurement, list[np.ndarray], np.ndarray, Any]:
    """One mode's row, the arrays compared with eager's (parameters, then every call's output),
    its per-call seconds (passes x calls) and the function it called.

    Example:
        >>> from dualflow.bench.shape_workloads import build_variable_batch
        >>> build = lambda rng, device: build_variable_batch(rng, device, [2, 3], hidden=4)
        >>> row, state, times, fn = measure_mode("w", build, "compiled", 1, 0)
        >>> row.ms_median > 0, times.shape, fn.stats().calls
        (True, (1, 2), 5)
    """
    built = build(np.random.default_rng(seed), device)
    calls = built["calls"]
    fn = prepare(mode, built["fn"], len({tuple(a.shape for a in args) for args in calls}))
    warmup = 2 if mode == "compiled-static" else 1  # static: every size traced before timing
    with warnings.catch_warnings():  # leaving the fast path: the row's note says it
        warnings.filterwarnings("ignore", "dualflow.compile: ", RuntimeWarning)
        times, outputs = run_passes(fn, calls, passes, warmup, device)
        largest = _largest(calls)
        peak = peak_memory(lambda: outputs.append(fn(*largest)), device) + held_bytes(fn)
    totals = times.sum(axis=1) * 1e3  # ms per pass: a step of the bench
    row = Measurement.of_times(name, mode, totals, peak)
    row.compile_ms, row.steps = compile_report(fn)
    if isinstance(fn, dualflow.tracer.CompiledFunction):
        stats = fn.stats()
        row.traces, row.plan_runs = stats.traces, stats.plan_runs
        if stats.eager_fallbacks:
            row.note = f"{stats.eager_fallbacks} of {stats.calls} calls left the fast path"
    return row, final_state({"params": built["params"]}, outputs), times, fn


def per_call_ratio(times: np.ndarray, static: np.ndarray) -> float:
    """Median over the calls of a pass of each call's time over the static plan's for the same
    call (each first reduced to its median over the passes).

    Example:
        >>> per_call_ratio(np.array([[2.0, 3.0, 8.0]]), np.array([[1.0, 3.0, 4.0]]))
        2.0
    """
    return float(np.median(np.median(times, axis=0) / np.median(static, axis=0)))


def _failed(name: str, mode: str, exc: Exception) -> Measurement:
    message = str(exc).splitlines()[0] if str(exc) else ""
    note = f"failed: {type(exc).__name__}: {message}"
    return Measurement(name, mode, 0.0, 0.0, 0.0, 0, 0, note=note)


def shape_rows(
    name: str, build: Builder, passes: int, seed: int, device: Device = CPU
) -> list[Measurement]:
    """The rows of a variable-shape workload in ``SHAPE_MODES`` order: compiled rows compared
    with eager (``compiled[exact]`` bit for bit) and with the static-shape plans per call.

    Example:
        >>> from dualflow.bench.shape_workloads import build_variable_batch
        >>> build = lambda rng, device: build_variable_batch(rng, device, [2, 3, 2], hidden=4)
        >>> rows = shape_rows("w", build, 1, 0)
        >>> [(r.mode, r.matches) for r in rows][1:3]
        [('compiled', True), ('compiled[exact]', True)]
    """
    measured: dict[str, tuple] = {}
    rows = {}
    for mode in ("eager", "compiled-static", "compiled", "compiled[exact]"):
        try:
            measured[mode] = measure_mode(name, build, mode, passes, seed, device)
        except Exception as exc:  # one broken cell must not hide the others' numbers
            rows[mode] = _failed(name, mode, exc)
            continue
        row, state, times, _ = measured[mode]
        rows[mode] = row
        if mode in ("eager", "compiled-static"):
            continue  # the references: eager for results, the static plans for time
        if "eager" in measured:
            eager_row, eager_state = measured["eager"][:2]
            compare(row, eager_row, eager_state, state)
            if mode == "compiled[exact]":
                row.matches = row.max_diff == 0.0  # the exact pipeline: bit for bit
        if "compiled-static" in measured:
            row.static_ratio = per_call_ratio(times, measured["compiled-static"][2])
    return [rows[mode] for mode in SHAPE_MODES]


def rows_of(name: str, build: Builder) -> Callable[..., list[Measurement]]:
    """The workload's ``rows(repeats, seed, device)``: ``repeats`` timed passes.

    Example:
        >>> rows_of("variable-batch", print).__name__
        'variable_batch_rows'
    """

    def rows(repeats: int, seed: int, device: Device = CPU) -> list[Measurement]:
        return shape_rows(name, build, repeats, seed, device)

    rows.__name__ = rows.__qualname__ = name.replace("-", "_") + "_rows"
    return rows
