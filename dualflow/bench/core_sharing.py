"""Whether the machine's CPUs compute apart: a probe of two threads' arithmetic at once.

A guest's two vCPUs are threads of the host, which can place both on one physical core (its two
hardware threads) for seconds at a time. The guest cannot see it: ``/proc/stat`` shows no steal,
the run queues no wait, yet two threads each run arithmetic at half speed. On the bench's
2-vCPU guest this came and went within minutes: the compiled ``elementwise`` step (two threads
at the core's FMA rate) took 1.43 ms, then 2.72 ms for a few seconds, then 1.43 again, with no
other process on the CPUs; a compute-bound loop timed alone and on two threads at once took
the same time in the first state and 1.94x as long in the second (design notes, twenty-first
session). A cell timed in that state measures another machine, as one timed while another
process took a core does, so the bench treats it as disturbed.

``sharing_ratio`` times an L1-resident loop of multiply-adds (no memory traffic) alone, on one
thread per core at once (each pinned to its CPU; hardware threads the OS knows share a core are
left out: they always would), and alone again: the time at once over the faster time alone,
~1.0 where the CPUs compute apart, ~2.0 where two share one core's arithmetic units.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from dualflow.kernels.base.native_crew import LINGER_S

SHARED = 1.5
"""A ratio above this: the CPUs shared arithmetic units while probed (apart ~1.0, shared ~2)."""

SETTLE_S = 0.05
"""Seconds the probe first sleeps: another pool's threads spinning after their last task (an
OpenMP runtime's, a peer's) stop, so they are not taken for a shared core."""

OWN_SETTLE_S = 5 * LINGER_S
"""The settle after this process's own calls: its native crew's workers watch for more work for
``LINGER_S`` after their last part (with room for a late one); numpy's BLAS threads sleep at
once (``background.blas``)."""

TOPOLOGY = Path("/sys/devices/system/cpu")  # Linux's per-CPU topology files

_ELEMENTS = 2048  # 8 KiB of float32 per thread: in any L1, so only arithmetic is timed
_SWEEPS = 16_000  # ~4.5 ms alone on a 2020s x86 core (~0.14 ns a float, vectorized)


@functools.cache
def _loop() -> Any:
    import numba  # noqa: PLC0415 - compiled at the first probe, not at the bench's import

    @numba.njit(nogil=True, cache=False, error_model="numpy")
    def burn(x: Any, out: Any, sweeps: int) -> None:  # pragma: no cover - compiled
        a, b, c = np.float32(0.25), np.float32(-0.5), np.float32(1.0)
        for _ in range(sweeps):
            for i in range(x.shape[0]):
                v = x[i]
                out[i] = (((a * v + b) * v + c) * v + a) * v + (((b * v + c) * v + a) * v + b)

    return burn


def _timed(
    burn: Any,
    x: np.ndarray,
    out: np.ndarray,
    seconds: list[float],
    cpu: int,
    start_line: threading.Barrier | None = None,
) -> None:
    # on ``cpu`` alone: the scheduler may start a new thread on its parent's CPU and leave it
    # there for the whole loop (two threads on one CPU read as a shared core), so each thread
    # is pinned to a CPU of its own; the caller restores its mask. ``start_line``: the threads
    # of one probe start together and ``seconds`` gets each one's end (the barrier stamps the
    # start once), so a thread that waits for its CPU counts the wait: with clocks of their
    # own, one CPU named twice read 1.01 once in CI (each thread ran alone, one after the other)
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setaffinity(0, {cpu})  # 0: the calling thread (Linux)
    if start_line is not None:
        start_line.wait()
        burn(x, out, _SWEEPS)
        seconds.append(time.perf_counter())
        return
    start = time.perf_counter()
    burn(x, out, _SWEEPS)
    seconds.append(time.perf_counter() - start)


def _at_once(burn: Any, cpus: list[int]) -> float:
    """Seconds from the start, all threads together (one per CPU of ``cpus``, this thread on
    the first), to the last thread's end of the loop."""
    seconds: list[float] = []
    arrays = [(np.ones(_ELEMENTS, np.float32), np.empty(_ELEMENTS, np.float32)) for _ in cpus]
    started: list[float] = []
    start_line = threading.Barrier(len(cpus), action=lambda: started.append(time.perf_counter()))
    workers = [
        threading.Thread(target=_timed, args=(burn, x, out, seconds, cpu, start_line))
        for (x, out), cpu in zip(arrays[1:], cpus[1:])
    ]
    for worker in workers:
        worker.start()
    _timed(burn, *arrays[0], seconds, cpus[0], start_line)
    for worker in workers:
        worker.join()
    return max(seconds) - started[0]


def allowed_cpus() -> list[int]:
    """The CPUs this thread may run on (its affinity), in order; [] where the OS cannot say.

    Example:
        >>> all(cpu >= 0 for cpu in allowed_cpus())
        True
    """
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return []


def parse_cpu_list(text: str) -> set[int]:
    """The CPUs of a sysfs CPU list such as ``"0-3,8"``; an empty set where it is not one.

    Example:
        >>> sorted(parse_cpu_list("0-2,8\\n")), parse_cpu_list("x")
        ([0, 1, 2, 8], set())
    """
    cpus: set[int] = set()
    for part in text.strip().split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            return set()
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def one_per_core(cpus: list[int], topology: Path = TOPOLOGY) -> list[int]:
    """``cpus`` less the hardware threads whose core an earlier one of them is on, as the OS
    reports the siblings (``thread_siblings_list``; a CPU it says nothing of is its own core).
    Two threads of one core the OS knows of always share it: the probe is after sharing the
    OS does not know of (a host's placement of a guest's vCPUs).

    Example:
        >>> one_per_core([0, 1], Path("/nonexistent"))
        [0, 1]
    """
    kept: list[int] = []
    seen: set[int] = set()
    for cpu in cpus:
        if cpu in seen:
            continue
        kept.append(cpu)
        try:
            siblings = (topology / f"cpu{cpu}" / "topology" / "thread_siblings_list").read_text()
        except OSError:
            continue
        seen |= parse_cpu_list(siblings)
    return kept


def sharing_ratio(settle_s: float = SETTLE_S, cpus: list[int] | None = None) -> float | None:
    """The loop's time on one thread per CPU of ``cpus`` (default: one CPU per core among
    those this thread may use, ``one_per_core``) at once, each pinned to its CPU, over its
    faster time alone (before and after): ~1.0 where the CPUs compute apart, ~2.0 where two of
    them share one core's arithmetic (or are one CPU named twice); None with fewer than two
    such CPUs or no affinity calls. ~15 ms after ``settle_s``.

    Example:
        >>> ratio = sharing_ratio(settle_s=0.0)
        >>> ratio is None or ratio > 0.5
        True
    """
    allowed = allowed_cpus()
    cpus = one_per_core(allowed) if cpus is None else cpus
    if len(cpus) < 2 or not allowed or not hasattr(os, "sched_setaffinity"):
        return None
    burn = _loop()
    x, out = np.ones(_ELEMENTS, np.float32), np.empty(_ELEMENTS, np.float32)
    burn(x, out, 1)  # compiled (the first probe), and this thread's L1 warm
    time.sleep(settle_s)
    alone: list[float] = []
    try:
        _timed(burn, x, out, alone, cpus[0])
        together = _at_once(burn, cpus)
        _timed(burn, x, out, alone, cpus[0])
    finally:
        os.sched_setaffinity(0, allowed)
    return together / max(min(alone), 1e-9)


def shared(ratio: float | None) -> bool:
    """Whether a probe's ratio says the CPUs shared arithmetic units (``SHARED``).

    Example:
        >>> shared(1.05), shared(1.9), shared(None)
        (False, True, False)
    """
    return ratio is not None and ratio > SHARED


def worst_sharing(*ratios: float | None) -> float | None:
    """The largest of probes' ratios taken around one measurement, None where none could say.

    Example:
        >>> worst_sharing(1.02, None, 1.97), worst_sharing(None, None)
        (1.97, None)
    """
    known = [r for r in ratios if r is not None]
    return max(known) if known else None
