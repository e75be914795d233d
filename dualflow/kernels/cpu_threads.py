"""The CPU kernels' worker threads: one kernel call split into parts that run on both cores.

numpy ufuncs and ``nogil`` numba kernels release the GIL, so a small persistent pool of Python
threads runs their parts at once, while OpenBLAS keeps its own threads idle between GEMMs (numba's
``prange`` pool spun next to them and made GEMMs 4-5x slower). Each part writes only its own
range, so a result never depends on the split or on timing.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

THREADS = min(2, os.cpu_count() or 1)
"""Parts one call is split into at most (this machine class has 2 cores)."""

_POOL: list[ThreadPoolExecutor] = []
_POOL_LOCK = threading.Lock()
_IN_WORKER = threading.local()


def pool() -> ThreadPoolExecutor:
    """The process's worker pool (``THREADS`` threads), made on first use.

    Example:
        >>> pool() is pool()
        True
    """
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(THREADS, thread_name_prefix="dualflow-cpu"))
        return _POOL[0]


def _in_worker(job: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        _IN_WORKER.active = True
        try:
            job()
        finally:
            _IN_WORKER.active = False

    return run


def run_parts(jobs: Sequence[Callable[[], None]]) -> None:
    """Run ``jobs`` at once: the first on this thread, the rest in the pool; returns when all
    have finished and re-raises the first error. Called from a pool worker (a kernel inside
    another kernel's part), the jobs run one after another instead, so workers never wait on
    each other.

    Example:
        >>> seen = []
        >>> run_parts([lambda: seen.append(0), lambda: seen.append(1)])
        >>> sorted(seen)
        [0, 1]
    """
    if len(jobs) <= 1 or getattr(_IN_WORKER, "active", False):
        for job in jobs:
            job()
        return
    futures = [pool().submit(_in_worker(job)) for job in jobs[1:]]
    try:
        jobs[0]()
    finally:
        errors = [f.exception() for f in futures]  # wait for every part, even after a failure
    for error in errors:
        if error is not None:
            raise error


def split(n: int, parts: int) -> list[tuple[int, int]]:
    """``[0, n)`` as at most ``parts`` contiguous, non-empty (start, stop) ranges of near-equal
    length, in order.

    Example:
        >>> split(5, 2), split(1, 2), split(0, 2)
        ([(0, 2), (2, 5)], [(0, 1)], [])
    """
    parts = max(1, min(parts, n))
    bounds = [n * k // parts for k in range(parts + 1)]
    return [(a, b) for a, b in itertools.pairwise(bounds) if b > a]


def parts_for(work: int, minimum: int) -> int:
    """How many parts a call with ``work`` units is split into: ``THREADS`` when each part
    gets at least ``minimum`` units (below that the hand-off, ~20-50 us, costs more than it
    saves), else 1.

    Example:
        >>> parts_for(10, 1 << 20), parts_for(1 << 22, 1 << 20) == min(THREADS, 4)
        (1, True)
    """
    return THREADS if work >= THREADS * minimum else 1
