"""Timing and memory measurement of one workload in one mode: medians over repeats, peak bytes.

Peak memory is measured during one step after warm-up, separately from the timed runs so that
tracing overhead never inflates times: with tracemalloc on the CPU (numpy reports its allocations
to it), with a high-water hook on cupy's memory pool on a GPU (``dualflow.bench.devices``).
"""

from __future__ import annotations

import gc
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from dualflow.bench import core_sharing
from dualflow.bench.cpu_share import others_during
from dualflow.bench.peers.child import deciles
from dualflow.device import CPU, Device


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
    max_rel_diff: float | None = None  # max_diff relative to the largest eager magnitude
    matches: bool | None = None  # max_diff or max_rel_diff within tolerance (modes.compare)
    gbps: float | None = None  # bytes the fused kernel must read + write, per second
    gflops: float | None = None  # the step's GEMM/convolution FLOPs per second (``flops``)
    gemm_share: float | None = None  # gflops / the machine's measured GEMM rate
    gemm_alone: float | None = None  # the plan's matmuls alone in numpy / inside the plan
    bandwidth_share: float | None = None  # gbps / the machine's measured copy bandwidth
    noisy: bool = False  # p10-p90 spread wider than the median (its or eager's): no speedup
    spread: float | None = None  # (p90 - p10) / median (dualflow.bench.idle.mark_busy)
    busy: bool = False  # spread above the run's --max-spread: the run does not count
    varies: bool = False  # a peer's wide spread on an idle machine: its own (idle.varies_alone)
    peer: bool = False  # measured in a peer framework's process (peers/runner.py)
    others_during: float | None = None  # others' CPU share while timed (the kept attempt's)
    cores_shared: float | None = None  # core_sharing's ratio around the timed calls (~2: shared)
    idle: bool | None = None  # the idle gate's verdict before this cell (None: not gated)
    others_cpu: float | None = None  # other processes' share of the CPUs at the gate
    held_bytes: int | None = None  # a fresh compiled step keeps after its first calls (measured)
    traces: int | None = None  # traces the compiled function made (variable-shape workloads)
    plan_runs: int | None = None  # calls it served with a plan (variable-shape workloads)
    static_ratio: float | None = None  # per-call ms / a static-shape plan's of the same size
    slower: str | None = None  # modes this compiled row is slower than, beyond noise (``slower``)
    ms_p10: float | None = None  # 10th and 90th percentiles of the timings (``deciles``)
    ms_p90: float | None = None
    attempts: int = 1  # times the cell was measured: a disturbed one is measured again
    dropped_spreads: list[float] | None = None  # the spreads of the attempts not kept

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def bounds(self) -> tuple[float, float]:
        """(10th, 90th) percentile of the timings; (min, max) for a row without percentiles.

        Example:
            >>> Measurement("w", "eager", 2.0, 1.5, 2.5, 5, 0).bounds()
            (1.5, 2.5)
        """
        if self.ms_p10 is None or self.ms_p90 is None:
            return self.ms_min, self.ms_max
        return self.ms_p10, self.ms_p90

    @classmethod
    def of_times(
        cls, workload: str, mode: str, ms: Any, peak_bytes: int, **fields: Any
    ) -> Measurement:
        """A row from its timings in milliseconds: median, min, max, deciles, repeats.

        Example:
            >>> row = Measurement.of_times("w", "eager", [1.0, 2.0, 9.0], 0)
            >>> row.ms_median, row.ms_max, row.ms_p90, row.noisy
            (2.0, 9.0, 7.6, True)
        """
        ms = [float(t) for t in ms]
        p10, p90 = deciles(ms)
        median = float(np.median(ms))
        row = cls(workload, mode, median, min(ms), max(ms), len(ms), peak_bytes, **fields)
        row.ms_p10, row.ms_p90 = p10, p90
        row.noisy = is_noisy(median, p10, p90)
        return row


def is_noisy(ms_median: float, low: float, high: float) -> bool:
    """Whether timings spread wider than their median (``low``, ``high``: the 10th and 90th
    percentiles): the machine was busy (another process took the cores for part of the run),
    so a ratio of medians is not a speed-up to report.

    Example:
        >>> is_noisy(1.0, 0.9, 1.3), is_noisy(1.0, 0.5, 2.6)
        (False, True)
    """
    return high - low > ms_median


def time_calls(
    fn: Callable[[], Any],
    repeats: int,
    warmup: int = 5,
    sync: Callable[[], Any] | None = None,
) -> np.ndarray:
    """Wall-clock seconds of ``repeats`` calls of ``fn`` after ``warmup`` untimed ones.

    ``sync`` (a GPU's synchronize) runs before each clock read: kernels launch asynchronously,
    so without it the clock would time the launches, not the work.

    Example:
        >>> len(time_calls(lambda: None, 3, warmup=1))
        3
    """
    wait = sync or (lambda: None)
    for k in range(warmup):
        # imported by the first call that asked it for a kernel, so looked up only now
        worker = sys.modules.get("dualflow.kernels.numba.compile_worker")
        if k > 0 and worker is not None and worker.pending():
            # kernels the worker still compiles run the blocked evaluator: not the step at
            # speed; the next warm-up call switches to (and loads) them. Waiting at once, not
            # at the last warm-up call, leaves the calls after it warm: a compiled-lazy step's
            # first lazy-or-eager probe then ends inside the warm-up, not in the timed calls.
            # No extra call: every mode must run the same number of steps (the bench compares
            # their final states)
            worker.wait()
        fn()
    times = np.empty(repeats)
    for i in range(repeats):
        wait()
        start = time.perf_counter()
        fn()
        wait()
        times[i] = time.perf_counter() - start
    return times


def peak_memory(fn: Callable[[], Any], device: Device = CPU) -> int:
    """Peak bytes allocated while running ``fn`` once, above what was live before.

    On the CPU this is tracemalloc's peak; on a CUDA device the high-water mark of bytes taken
    from cupy's memory pool (see ``dualflow.bench.devices.gpu_peak_memory``).

    Example:
        >>> peak_memory(lambda: np.ones(1_000_000)) >= 8_000_000
        True
    """
    if device.kind != "cpu":
        from dualflow.bench.devices import gpu_peak_memory  # noqa: PLC0415 - needs cupy

        return gpu_peak_memory(fn, device)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        fn()
        return max(0, tracemalloc.get_traced_memory()[1] - before)
    finally:
        tracemalloc.stop()


def held_after_first_calls(step: Callable[[], Any], calls: int = 2, device: Device = CPU) -> int:
    """Bytes still allocated after the first ``calls`` calls of ``step`` (a fresh compiled
    function), each result dropped at once: what the function keeps between calls, its plans'
    buffers and constants and anything its trace failed to let go of (tracemalloc on the CPU,
    the blocks of cupy's memory pool not given back on a GPU).

    The garbage collector is off meanwhile: arrays a reference cycle holds stay allocated until
    it happens to run, so they count as held (issue 36: a trace's tracing run, 30 MiB here).

    Example:
        >>> kept = []
        >>> held_after_first_calls(lambda: kept.append(np.ones(1000))) >= 16000
        True
    """

    def first_calls() -> None:
        for _ in range(calls):
            step()

    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        if device.kind != "cpu":
            from dualflow.bench.devices import gpu_held_memory  # noqa: PLC0415 - needs cupy

            return gpu_held_memory(first_calls, device)
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            first_calls()
            return max(0, tracemalloc.get_traced_memory()[0] - before)
        finally:
            tracemalloc.stop()
    finally:
        if enabled:
            gc.enable()


def measure(
    workload: str,
    mode: str,
    step: Callable[[], Any],
    repeats: int,
    baseline: Callable[[], Any] | None = None,
    warmup: int = 5,
    device: Device = CPU,
) -> Measurement:
    """Time ``step`` and measure its peak memory (and the optional baseline's time); the row
    records what the core-sharing probe read right before and after the timed calls
    (``cores_shared``: ``core_sharing``).

    Example:
        >>> row = measure("noop", "eager", lambda: None, 3, warmup=1)
        >>> (row.workload, row.repeats, row.ms_min <= row.ms_median <= row.ms_max)
        ('noop', 3, True)
    """
    sync = None
    if device.kind != "cpu":
        from dualflow.bench.devices import synchronizer  # noqa: PLC0415 - needs cupy

        sync = synchronizer(device)
    time_calls(step, 0, warmup, sync)  # traced, kernels compiled and loaded: steady calls next
    # the CPUs computing apart, right before and after the timed calls (this process's own
    # workers stop spinning within ~1 ms of a call: a short settle)
    before = core_sharing.sharing_ratio(core_sharing.OWN_SETTLE_S)
    times, others = others_during(lambda: time_calls(step, repeats, 0, sync) * 1e3)
    after = core_sharing.sharing_ratio(core_sharing.OWN_SETTLE_S)
    sharing = core_sharing.worst_sharing(before, after)
    base = None
    if baseline is not None:
        base = float(np.median(time_calls(baseline, repeats, warmup, sync) * 1e3))
    row = Measurement.of_times(workload, mode, times, peak_memory(step, device), baseline_ms=base)
    row.others_during = others  # other processes' CPU share during the timed calls
    row.cores_shared = sharing
    return row
