"""The cost constants the passes and kernels decide by, derived from this machine's measured
rates (``derive``) instead of one development machine's numbers: measured once per machine
(~0.1 s, lazily at first need) and kept in the signed kernels cache (``per_machine``).

The probe times, on one thread where the model allows it (a busy machine stretches
multi-thread timings to whole scheduler ticks): a float32 GEMM on one BLAS thread, a copy out of
the caches on one thread, the same copy split over the kernel threads (``cpu_threads``), a
softmax over rows in the caches on one thread, and the hand-off of empty jobs to those threads.
Each constant's model is in ``derive``; a derived value outside its sanity bounds (a probe
disturbed by load, a machine unlike any the model knows) keeps the default and says so in
``MachineConstants.note`` (no warning).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from dualflow.background import blas
from dualflow.kernels.base.cpu_threads import run_parts, split, threads
from dualflow.kernels.base.per_machine import PerMachine, best_of, one_blas_thread, timings_of

GEMM_N = 384  # 113 MFLOP: ~2-4 ms on one core, big enough for OpenBLAS's blocked kernel
COPY_BYTES = 32 << 20  # bytes written per copy: with its source, twice a 32 MiB L3
REPEATS = 5
HANDOFFS = 50  # hand-offs timed (each ~10-50 us: the least of many, as for the part models)
MIN_HANDOFF = 2e-6  # waking a thread and waiting for it takes longer: below, none took place
MIN_SAVING = 0.1
"""The least share of a one-thread copy's time the other threads must save for a split's
saving to count as measured (below it: load or shared cores; the default is kept)."""
SOFTMAX_ROWS = (256, 256)  # 64K float32 elements (256 KiB): ~0.1 ms, in L2 like attention's rows
HANDOFFS_PER_PART = 4
"""One-thread time a part of a compute-bound split must take, in hand-offs: where a split into
two parts started to pay on a 2-core EPYC (design notes, issue 38 `consts`: batched GEMMs from
3.1-4.2 hand-offs a part, softmax rows from 2.6-4.8, 2x2 max pooling from ~3.5)."""
POOL_COPIES = 1.5
"""One-thread time of a 2x2 stride-2 max pool per image element, in the probe's one-thread copies
of a float32 element beyond the caches, that ``pool_part_min`` is derived for (measured 1.35-1.6
at 0.4-1M elements on the development machine). The pooling kernels measure their own on each
machine (``pool_kernels.pool_copies``: this module sits below them) and scale ``pool_part_min``
to it (``pool_part_min_for``); ``pool_kernels`` then scales it by the window's taps per stride
step."""


@dataclass(frozen=True)
class MachineConstants:
    """The constants, with the defaults they had as one machine's numbers.

    ``balance``: FLOPs the CPU does in the time it moves one byte (``passes.remat_cost``);
    ``part_min``: elements per part from which a numba elementwise call as light as a copy is
    split over the threads (``numba_elementwise``; heavier kernels: ``part_min_for``);
    ``part_min_bytes``: bytes written per part from which the convolution's copies are
    (``conv.column_copies``); ``part_flops``: FLOPs per part from which a batch of small GEMMs
    is (``linalg.gemm``); ``softmax_part_min`` and ``pool_part_min``: elements per part from
    which a softmax's rows (``ops.softmax``) and a pooling kernel's planes (``pool_kernels``)
    are, the pool's for one of ``POOL_COPIES`` (``pool_part_min_for``); ``copy_ns``: the
    one-thread copy's time per float32 element beyond the caches, the unit in which kernels
    state their work (``part_min_for``; ``fast_math.work_weights``). ``note``: what was
    measured, or why a default was kept.
    """

    balance: int = 6
    part_min: int = 1 << 21
    part_min_bytes: int = 1 << 20
    part_flops: int = 1 << 23
    softmax_part_min: int = 1 << 16
    pool_part_min: int = 1 << 15
    copy_ns: float = 0.27
    note: str = "defaults"

    def part_min_for(self, work: float) -> int:
        """Elements per part from which an elementwise kernel doing ``work`` copies' worth of
        one-thread time per element is split: ``part_min`` (a copy's) over ``work``, never below
        ``PART_MIN_FLOOR`` (a kernel that computes more saves more by splitting: it pays earlier).

        Example:
            >>> c = MachineConstants()
            >>> c.part_min_for(1.0) == c.part_min, c.part_min_for(4.0), c.part_min_for(1e9)
            (True, 524288, 4096)
        """
        return max(PART_MIN_FLOOR, int(self.part_min / max(1.0, work)))

    def pool_part_min_for(self, copies: float) -> int:
        """Image elements per part from which a 2x2 stride-2 max pool taking ``copies`` copies'
        one-thread time per image element (measured by the pooling kernels) is split:
        ``pool_part_min`` (derived for ``POOL_COPIES``) scaled to it, at least 1.

        Example:
            >>> c = MachineConstants()
            >>> c.pool_part_min_for(POOL_COPIES) == c.pool_part_min, c.pool_part_min_for(3.0)
            (True, 16384)
        """
        return max(1, round(self.pool_part_min * POOL_COPIES / copies))

    def describe(self) -> str:
        """One line naming the values.

        Example:
            >>> MachineConstants().describe()
            'machine constants: balance 6 FLOP/byte, part_min 2097152 elements, part_min_bytes 1048576, part_flops 8388608, softmax_part_min 65536, pool_part_min 32768, copy 0.27 ns/element (defaults)'
        """  # noqa: E501 - a doctest's output line
        return (
            f"machine constants: balance {self.balance} FLOP/byte, part_min {self.part_min} "
            f"elements, part_min_bytes {self.part_min_bytes}, part_flops {self.part_flops}, "
            f"softmax_part_min {self.softmax_part_min}, pool_part_min {self.pool_part_min}, "
            f"copy {self.copy_ns:g} ns/element ({self.note})"
        )


DEFAULTS = MachineConstants()
BOUNDS = {
    "balance": (1, 64),
    "part_min_bytes": (16 << 10, 256 << 20),
    "part_flops": (1 << 18, 1 << 28),
    "softmax_part_min": (1 << 12, 1 << 22),
    "pool_part_min": (1 << 12, 1 << 22),
    "copy_ns": (0.01, 10.0),
}
PART_MIN_FLOOR = BOUNDS["part_min_bytes"][0] // 4
"""The least ``part_min`` ``derive`` gives: a call below twice it is never split (no lookup)."""
FIELDS = (
    "gemm_s",
    "gemm_flop",
    "copy_s",
    "copy_bytes",
    "split_s",
    "softmax_s",
    "softmax_elements",
    "handoff_s",
    "threads",
)


def derive(timings: dict) -> MachineConstants:
    """The constants from a probe's ``timings`` (seconds; ``FIELDS``), by these models:

    - ``balance`` = GEMM FLOP/s over copy bytes (read + written) per second, both one thread
      (both scale alike with threads): what recomputing a memory-bound op costs in FLOPs.
    - ``copy_ns``: the one-thread copy's seconds per float32 element, in ns (0.001 rounded).
    - ``part_min_bytes``: splitting a copy of B bytes over T threads saves
      ``B * (copy_s - (split_s - handoff_s)) / copy_bytes`` and costs one hand-off; the split
      pays from ``B = handoff_s / saved_per_byte``, i.e. ``B / T`` bytes per part (``parts_for``
      splits from ``T`` times the minimum).
    - ``part_min``: the same in float32 elements (4 bytes written each). A copy is the least
      work an elementwise kernel does per element; ``part_min_for`` scales it to heavier ones.
    - ``part_flops``, ``softmax_part_min``, ``pool_part_min`` (compute-bound splits, whose
      saving does not hang on the memory bandwidth a split copy measures): a part must take
      ``HANDOFFS_PER_PART`` hand-offs of one-thread time, at the one-thread GEMM rate, the
      softmax's rate, and ``POOL_COPIES`` copies' time per image element.

    Example:
        >>> t = dict(gemm_s=1e-3, gemm_flop=6e7, copy_s=1e-3, copy_bytes=5e6, split_s=6e-4,
        ...          softmax_s=1e-4, softmax_elements=65536, handoff_s=1e-4, threads=2)
        >>> c = derive(t)  # 60 GFLOP/s over 10 GB/s; a split saves 0.5 ms per 5 MB
        >>> c.balance, c.part_min_bytes, c.part_min
        (6, 500000, 125000)
        >>> c.part_flops, c.softmax_part_min, c.pool_part_min  # 4 hand-offs' work each
        (24000000, 262144, 333333)
        >>> c.copy_ns  # 1 ms for 1.25M elements
        0.8
    """
    notes, values = [], {}
    rate = timings["gemm_flop"] / timings["gemm_s"]
    bandwidth = 2 * timings["copy_bytes"] / timings["copy_s"]
    values["balance"] = round(rate / bandwidth)
    values["copy_ns"] = round(timings["copy_s"] / (timings["copy_bytes"] / 4) * 1e9, 3)
    if timings["threads"] < 2:
        notes.append("one thread: parts kept")  # nothing is split; the value never matters
    elif timings["handoff_s"] < MIN_HANDOFF:  # the jobs ran inline: another call held the crew
        notes.append("no hand-off measured: parts kept")
    else:
        values.update(_split_parts(timings, rate, notes))
    for name, (low, high) in BOUNDS.items():
        if name in values and not low <= values[name] <= high:
            notes.append(f"{name} {values.pop(name)} out of [{low}, {high}]: default kept")
    if "part_min_bytes" in values:
        values["part_min"] = values["part_min_bytes"] // 4
    note = "measured" + "".join(f"; {n}" for n in notes)
    return replace(DEFAULTS, **values, note=note)


def _split_parts(timings: dict, gemm_rate: float, notes: list[str]) -> dict[str, int]:
    """``derive``'s part sizes from a measured hand-off on two threads or more (a split copy
    that saved too little appends its note to ``notes`` and keeps its defaults)."""
    values = {}
    handoff = timings["handoff_s"]
    saved = timings["copy_s"] - (timings["split_s"] - handoff)
    if saved < MIN_SAVING * timings["copy_s"]:
        share = saved / timings["copy_s"]
        notes.append(f"a split copy saved {share:.0%} (load?): copy parts kept")
    else:
        per_byte = saved / timings["copy_bytes"]
        values["part_min_bytes"] = round(handoff / per_byte / timings["threads"])
    copy_rate = timings["copy_bytes"] / 4 / timings["copy_s"]  # float32 elements per second
    rates = {
        "part_flops": gemm_rate,
        "softmax_part_min": timings["softmax_elements"] / timings["softmax_s"],
        "pool_part_min": copy_rate / POOL_COPIES,
    }
    for name, per_second in rates.items():
        values[name] = round(HANDOFFS_PER_PART * handoff * per_second)
    return values


def _copy_parts(target: np.ndarray, source: np.ndarray, count: int) -> None:
    jobs = [
        functools.partial(np.copyto, target[a:b], source[a:b]) for a, b in split(source.size, count)
    ]
    run_parts(jobs)


def _softmax_rows(x: np.ndarray, out: np.ndarray) -> None:
    # ops.softmax's row steps (its module is above this layer): max, subtract, exp, sum, divide
    np.subtract(x, x.max(axis=-1, keepdims=True), out=out)
    np.exp(out, out=out)
    out /= out.sum(axis=-1, keepdims=True)


def _gemm_s(rng: np.random.Generator) -> float:
    """Seconds of a ``GEMM_N``-cubed float32 GEMM on one BLAS thread."""
    a, b = rng.standard_normal((2, GEMM_N, GEMM_N), dtype=np.float32)
    c = np.empty_like(a)
    with one_blas_thread():
        (gemm,) = best_of((functools.partial(np.matmul, a, b, out=c),), REPEATS)
        # where BLAS's threads could not be set to one (another thread may be in a GEMM), its
        # rate per thread, as if they scaled perfectly
        return gemm * (blas.get_threads() or 1)


def measure() -> dict:
    """Time the probe now (``FIELDS``; ~0.1 s on a 2-core machine).

    Example:
        >>> sorted(measure()) == sorted(FIELDS)
        True
    """
    rng = np.random.default_rng(0)
    gemm = _gemm_s(rng)
    source = np.ones(COPY_BYTES // 4, np.float32)
    target = np.empty_like(source)
    logits = rng.standard_normal(SOFTMAX_ROWS, dtype=np.float32)
    count = threads()
    copy, split_copy = best_of(
        (
            functools.partial(np.copyto, target, source),
            functools.partial(_copy_parts, target, source, count),
        ),
        REPEATS,
    )
    # alone, after the copies: its rows stay in the caches, as attention's do between steps
    rows = functools.partial(_softmax_rows, logits, np.empty_like(logits))
    (softmax,) = best_of((rows,), 4 * REPEATS)
    nothing = [lambda: None] * count
    (handoff,) = best_of((functools.partial(run_parts, nothing),), HANDOFFS)
    return dict(
        gemm_s=gemm,
        gemm_flop=2.0 * GEMM_N**3,
        copy_s=copy,
        copy_bytes=float(COPY_BYTES),
        split_s=split_copy,
        softmax_s=softmax,
        softmax_elements=float(logits.size),
        handoff_s=handoff,
        threads=count,
    )


def _read(record: object) -> MachineConstants | None:
    """The constants of a cache record (derived again from its timings: a model change applies
    without a new measurement), or None when it is not one."""
    timings = timings_of(record, FIELDS)
    return None if timings is None else derive(timings)


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
