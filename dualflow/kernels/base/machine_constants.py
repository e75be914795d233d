"""The cost constants the passes and kernels decide by, derived from this machine's measured
rates (``derive``) instead of one development machine's numbers: measured once per machine
(~0.1 s, lazily at first need) and kept in the signed kernels cache (``per_machine``).

The probe times, on one thread where the model allows it (a busy machine stretches
multi-thread timings to whole scheduler ticks): a float32 GEMM on one BLAS thread, a copy out of
the caches on one thread, the same copy split over the kernel threads (``cpu_threads``), and the
hand-off of empty jobs to those threads. Each constant's model is in ``derive``; a derived value
outside its sanity bounds (a probe disturbed by load, a machine unlike any the model knows)
keeps the default and says so in ``MachineConstants.note`` (no warning).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from dualflow.background import blas
from dualflow.kernels.base.cpu_threads import run_parts, split, threads
from dualflow.kernels.base.per_machine import PerMachine, best_of, one_blas_thread

GEMM_N = 384  # 113 MFLOP: ~2-4 ms on one core, big enough for OpenBLAS's blocked kernel
COPY_BYTES = 32 << 20  # bytes written per copy: with its source, twice a 32 MiB L3
REPEATS = 5
HANDOFFS = 20  # hand-offs timed (each ~10-50 us)
MIN_HANDOFF = 2e-6  # waking a thread and waiting for it takes longer: below, none took place
MIN_SAVING = 0.1
"""The least share of a one-thread copy's time the other threads must save for a split's
saving to count as measured (below it: load or shared cores; the default is kept)."""


@dataclass(frozen=True)
class MachineConstants:
    """The constants, with the defaults they had as one machine's numbers.

    ``balance``: FLOPs the CPU does in the time it moves one byte (``passes.remat_cost``);
    ``part_min``: elements per part from which a numba elementwise call is split over the
    threads (``numba_elementwise``); ``part_min_bytes``: bytes written per part from which the
    convolution's copies are (``conv.column_copies``). ``note``: what was measured, or why a
    default was kept.
    """

    balance: int = 6
    part_min: int = 1 << 21
    part_min_bytes: int = 1 << 20
    note: str = "defaults"

    def describe(self) -> str:
        """One line naming the values.

        Example:
            >>> MachineConstants().describe()
            'machine constants: balance 6 FLOP/byte, part_min 2097152 elements, part_min_bytes 1048576 (defaults)'
        """  # noqa: E501 - a doctest's output line
        return (
            f"machine constants: balance {self.balance} FLOP/byte, part_min {self.part_min} "
            f"elements, part_min_bytes {self.part_min_bytes} ({self.note})"
        )


DEFAULTS = MachineConstants()
BOUNDS = {"balance": (1, 64), "part_min_bytes": (16 << 10, 256 << 20)}
PART_MIN_FLOOR = BOUNDS["part_min_bytes"][0] // 4
"""The least ``part_min`` ``derive`` gives: a call below twice it is never split (no lookup)."""
FIELDS = ("gemm_s", "gemm_flop", "copy_s", "copy_bytes", "split_s", "handoff_s", "threads")


def derive(timings: dict) -> MachineConstants:
    """The constants from a probe's ``timings`` (seconds; ``FIELDS``), by these models:

    - ``balance`` = GEMM FLOP/s over copy bytes (read + written) per second, both one thread
      (both scale alike with threads): what recomputing a memory-bound op costs in FLOPs.
    - ``part_min_bytes``: splitting a copy of B bytes over T threads saves
      ``B * (copy_s - (split_s - handoff_s)) / copy_bytes`` and costs one hand-off; the split
      pays from ``B = handoff_s / saved_per_byte``, i.e. ``B / T`` bytes per part (``parts_for``
      splits from ``T`` times the minimum).
    - ``part_min``: the same in float32 elements (4 bytes written each). A copy is the least
      work an elementwise kernel does per element, so a kernel that computes more saves more
      by splitting and pays earlier: the copy's threshold never splits a call that loses.

    Example:
        >>> t = dict(gemm_s=1e-3, gemm_flop=6e7, copy_s=1e-3, copy_bytes=5e6, split_s=6e-4,
        ...          handoff_s=1e-4, threads=2)
        >>> c = derive(t)  # 60 GFLOP/s over 10 GB/s; a split saves 0.5 ms per 5 MB
        >>> c.balance, c.part_min_bytes, c.part_min
        (6, 500000, 125000)
    """
    notes, values = [], {}
    rate = timings["gemm_flop"] / timings["gemm_s"]
    bandwidth = 2 * timings["copy_bytes"] / timings["copy_s"]
    values["balance"] = round(rate / bandwidth)
    saved = timings["copy_s"] - (timings["split_s"] - timings["handoff_s"])
    if timings["threads"] < 2:
        notes.append("one thread: parts kept")  # nothing is split; the value never matters
    elif timings["handoff_s"] < MIN_HANDOFF:  # the jobs ran inline: another call held the crew
        notes.append("no hand-off measured: parts kept")
    elif saved < MIN_SAVING * timings["copy_s"]:
        notes.append(f"a split copy saved {saved / timings['copy_s']:.0%} (load?): parts kept")
    else:
        per_byte = saved / timings["copy_bytes"]
        values["part_min_bytes"] = round(timings["handoff_s"] / per_byte / timings["threads"])
    for name, (low, high) in BOUNDS.items():
        if name in values and not low <= values[name] <= high:
            notes.append(f"{name} {values.pop(name)} out of [{low}, {high}]: default kept")
    if "part_min_bytes" in values:
        values["part_min"] = values["part_min_bytes"] // 4
    note = "measured" + "".join(f"; {n}" for n in notes)
    return replace(DEFAULTS, **values, note=note)


def _copy_parts(target: np.ndarray, source: np.ndarray, count: int) -> None:
    jobs = [
        functools.partial(np.copyto, target[a:b], source[a:b]) for a, b in split(source.size, count)
    ]
    run_parts(jobs)


def measure() -> dict:
    """Time the probe now (``FIELDS``; ~0.1 s on a 2-core machine).

    Example:
        >>> sorted(measure()) == sorted(FIELDS)
        True
    """
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, GEMM_N, GEMM_N), dtype=np.float32)
    c = np.empty_like(a)
    source = np.ones(COPY_BYTES // 4, np.float32)
    target = np.empty_like(source)
    count = threads()
    with one_blas_thread():
        (gemm,) = best_of((functools.partial(np.matmul, a, b, out=c),), REPEATS)
        # where BLAS's threads could not be set to one (another thread may be in a GEMM), its
        # rate per thread, as if they scaled perfectly
        gemm *= blas.get_threads() or 1
    copy, split_copy = best_of(
        (
            functools.partial(np.copyto, target, source),
            functools.partial(_copy_parts, target, source, count),
        ),
        REPEATS,
    )
    nothing = [lambda: None] * count
    (handoff,) = best_of((functools.partial(run_parts, nothing),), HANDOFFS)
    return dict(
        gemm_s=gemm,
        gemm_flop=2.0 * GEMM_N**3,
        copy_s=copy,
        copy_bytes=float(COPY_BYTES),
        split_s=split_copy,
        handoff_s=handoff,
        threads=count,
    )


def _read(record: object) -> MachineConstants | None:
    """The constants of a cache record (derived again from its timings: a model change applies
    without a new measurement), or None when it is not one."""
    timings = record["timings"] if isinstance(record, dict) else None
    if not isinstance(timings, dict) or set(timings) != set(FIELDS):
        return None
    if not all(isinstance(v, (int, float)) and v > 0 for v in timings.values()):
        return None
    return derive(timings)


def _record() -> dict:
    timings = measure()
    return {"timings": timings, "derived": derive(timings).__dict__}


def _keep(record: dict) -> bool:
    """Whether a record is worth keeping for the machine: not when the hand-off did not take
    place (this call ran inside a worker's part, or another call held the threads; the next
    process measures again)."""
    timings = record["timings"]
    return timings["threads"] < 2 or timings["handoff_s"] >= MIN_HANDOFF


_CONSTANTS = PerMachine(
    "machine_constants", lambda: _record(), _read, DEFAULTS, lambda: (threads(),), _keep
)


def machine_constants() -> MachineConstants:
    """This machine's constants: read from the kernels cache, or measured and written there at
    the first need on a machine (key: ``per_machine.machine_key`` and the kernel threads);
    ``DEFAULTS`` under ``DUALFLOW_MACHINE_CONSTANTS=defaults``. Fixed for the process once read.

    Example:
        >>> machine_constants().balance >= 1
        True
    """
    return _CONSTANTS.get()


def forget() -> None:
    """Drop this process's constants: the next ``machine_constants`` reads (or measures) them
    again (tests).

    Example:
        >>> before = machine_constants(); forget(); machine_constants() == before
        True
    """
    _CONSTANTS.forget()
