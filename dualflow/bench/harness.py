"""Timing and memory measurement of one workload in one mode: medians over repeats, peak bytes.

Peak memory is measured with tracemalloc (numpy reports its allocations to it) during one step
after warm-up, separately from the timed runs so that tracing overhead never inflates times.
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


@dataclass
class Measurement:
    """The numbers of one (workload, mode) cell of the bench table."""

    workload: str
    mode: str
    ms_median: float
    ms_min: float
    ms_max: float
    repeats: int
    peak_bytes: int
    baseline_ms: float | None = None
    compile_ms: float | None = None  # trace + lower time, compiled modes only
    steps: int | None = None  # kernels and guards run per call (compiled modes)
    max_diff: float | None = None  # max |param/output - eager's| after the same steps
    speedup: float | None = None  # eager ms / this mode's ms
    mem_ratio: float | None = None  # peak bytes / eager's peak bytes
    note: str | None = None  # what the numbers cannot say (ranks, skipped, failed)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def time_calls(fn: Callable[[], Any], repeats: int, warmup: int = 5) -> np.ndarray:
    """Wall-clock seconds of ``repeats`` calls of ``fn`` after ``warmup`` untimed ones.

    Example:
        >>> len(time_calls(lambda: None, 3, warmup=1))
        3
    """
    for _ in range(warmup):
        fn()
    times = np.empty(repeats)
    for i in range(repeats):
        start = time.perf_counter()
        fn()
        times[i] = time.perf_counter() - start
    return times


def peak_memory(fn: Callable[[], Any]) -> int:
    """Peak bytes allocated (tracemalloc) while running ``fn`` once, above what was live before.

    Example:
        >>> peak_memory(lambda: np.ones(1_000_000)) >= 8_000_000
        True
    """
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        fn()
        return max(0, tracemalloc.get_traced_memory()[1] - before)
    finally:
        tracemalloc.stop()


def measure(
    workload: str,
    mode: str,
    step: Callable[[], Any],
    repeats: int,
    baseline: Callable[[], Any] | None = None,
) -> Measurement:
    """Time ``step`` and measure its peak memory (and the optional baseline's time)."""
    times = time_calls(step, repeats) * 1e3
    base = float(np.median(time_calls(baseline, repeats) * 1e3)) if baseline else None
    return Measurement(
        workload,
        mode,
        float(np.median(times)),
        float(times.min()),
        float(times.max()),
        repeats,
        peak_memory(step),
        base,
    )
