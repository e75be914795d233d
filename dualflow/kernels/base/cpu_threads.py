"""The CPU kernels' worker threads: one kernel call split into parts that run on both cores.

numpy ufuncs and ``nogil`` numba kernels release the GIL, so persistent Python threads run their
parts at once, while OpenBLAS keeps its own threads idle between GEMMs (numba's ``prange`` pool
spun next to them and made GEMMs 4-5x slower). Each part writes only its own range, so a result
never depends on the split or on timing.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Sequence

THREADS = min(2, os.cpu_count() or 1)
"""Parts one call is split into at most (this machine class has 2 cores)."""

_IN_WORKER = threading.local()


class _Worker:
    """A persistent thread that runs the jobs handed to it, one hand-off at a time.

    A plain lock wakes it (``ready``) and an event says its jobs ran (``done``): a
    ``ThreadPoolExecutor`` took ~65 us a call here, with its queue and futures; these ~40 us.
    The event, not a second lock, because an interrupt (Ctrl-C) may land just after a wait
    returned: waiting again on a set event returns at once, where a lock would deadlock.
    """

    def __init__(self, index: int) -> None:
        self.ready, self.done = threading.Lock(), threading.Event()
        self.ready.acquire()
        self.done.set()
        self.jobs: Sequence[Callable[[], None]] = ()
        self.error: BaseException | None = None
        name = f"dualflow-cpu-{index}"
        threading.Thread(target=self._loop, name=name, daemon=True).start()

    def _loop(self) -> None:
        _IN_WORKER.active = True  # a kernel inside a part runs its own parts serially
        while True:
            self.ready.acquire()
            self._run()
            self.done.set()

    def _run(self) -> None:
        """The jobs handed over, in a frame of their own: when it returns nothing refers to
        them (a loop variable in ``_loop`` kept the last job, its arrays, until the next call)."""
        jobs, self.jobs = self.jobs, ()
        try:
            for job in jobs:
                job()
        except BaseException as exc:  # handed back to the caller, which re-raises it
            self.error = exc

    def start(self, jobs: Sequence[Callable[[], None]]) -> None:
        self.done.wait()  # parts an interrupted call left running finish first (else no wait)
        self.jobs, self.error = jobs, None
        self.done.clear()
        self.ready.release()

    def finish(self) -> tuple[BaseException | None, BaseException | None]:
        """Wait for the jobs: (the error one raised, an interrupt that came while waiting).

        An interrupt does not end the wait: the part still writes its rows of an output that
        a plan may hand to the next step.
        """
        interrupt = None
        while True:
            try:
                self.done.wait()
                error, self.error = self.error, None  # raised once, never again
                return error, interrupt
            except BaseException as exc:  # KeyboardInterrupt: keep waiting, then raise it
                interrupt = exc


_CREW: list[_Worker] = []  # THREADS - 1 workers, made on first use in this process
_CREW_LOCK = threading.Lock()  # held by the call using the crew: another runs its jobs itself


def _reset_after_fork() -> None:
    # a forked child has none of its parent's threads: its first split makes its own crew
    global _CREW_LOCK
    _CREW.clear()
    _CREW_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_reset_after_fork)


def crew() -> list[_Worker]:
    """The process's workers (``THREADS - 1`` of them; the caller runs a share too). Call only
    while holding the crew lock (``run_parts`` does).

    Example:
        >>> with _CREW_LOCK:
        ...     len(crew()) == THREADS - 1
        True
    """
    if not _CREW:
        _CREW.extend(_Worker(k) for k in range(THREADS - 1))
    return _CREW


def run_parts(jobs: Sequence[Callable[[], None]]) -> None:
    """Run ``jobs`` at once, dealt round-robin to this thread and the workers; returns when all
    have finished and re-raises the first error (this thread's first). Called from a worker (a
    kernel inside another kernel's part), or while another thread's call holds the workers, the
    jobs run one after another on this thread instead, so no call ever waits for a worker.

    Example:
        >>> seen = []
        >>> run_parts([lambda: seen.append(0), lambda: seen.append(1)])
        >>> sorted(seen)
        [0, 1]
    """
    lock = _CREW_LOCK
    if len(jobs) <= 1 or getattr(_IN_WORKER, "active", False) or not lock.acquire(False):
        for job in jobs:
            job()
        return
    try:
        workers = crew()
        shares = [jobs[k :: len(workers) + 1] for k in range(len(workers) + 1)]
        handed = [(w, share) for w, share in zip(workers, shares[1:]) if share]
        try:
            for worker, share in handed:
                worker.start(share)
            for job in shares[0]:
                job()
        finally:
            ends = [worker.finish() for worker, _ in handed]  # every part, even after a failure
    finally:
        lock.release()
    for error in [interrupt for _, interrupt in ends] + [error for error, _ in ends]:
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
    gets at least ``minimum`` units (below that the hand-off, ~40 us, and the second core's
    share of the memory bandwidth save less than they cost), else 1.

    Example:
        >>> parts_for(10, 1 << 20), parts_for(1 << 22, 1 << 20) == min(THREADS, 4)
        (1, True)
    """
    return THREADS if work >= THREADS * minimum else 1
