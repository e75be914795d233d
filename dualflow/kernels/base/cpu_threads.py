"""One kernel call split into parts that run at once on the background owner's worker threads.

numpy ufuncs and ``nogil`` numba kernels release the GIL, so persistent Python threads run their
parts at once (numba's ``prange`` pool spun next to OpenBLAS's threads and made GEMMs 4-5x
slower). The threads, their count and their lifetime belong to ``dualflow.background``: they
sleep while idle, as OpenBLAS's are made to. Each part writes only its own range, so a result
never depends on the split or on timing.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from dualflow.background import blas
from dualflow.background.placement import current_cpu
from dualflow.background.process import blas_callers, owner
from dualflow.background.workers import IN_WORKER
from dualflow.kernels.base.atomics import SPIN_LOADS, wait_for_flag


def threads() -> int:
    """Parts one call is split into at most: the owner's thread count (the machine's CPUs,
    ``DUALFLOW_NUM_THREADS`` or ``dualflow.set_num_threads``).

    Example:
        >>> from dualflow.background import get_num_threads
        >>> threads() == get_num_threads()
        True
    """
    return owner().threads


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
    work = owner()
    lock = work.crew.lock
    if len(jobs) <= 1 or IN_WORKER.active or not lock.acquire(False):
        for job in jobs:
            job()
        return
    try:
        workers = work.workers()
        shares = [jobs[k :: len(workers) + 1] for k in range(len(workers) + 1)]
        errors = np.geterr()  # numpy's error state is per thread: the caller's rules every part
        handed = [(w, [_under(errors, share)]) for w, share in zip(workers, shares[1:]) if share]
        try:
            cpu = current_cpu()  # the workers run off it: the OS would pile them onto it
            for worker, share in handed:
                worker.start(share, cpu)
            for job in shares[0]:
                job()
        finally:
            # every part, even after a failure; watched with the GIL released, not slept on
            ends = [worker.finish(_wait_for_part) for worker, _ in handed]
    finally:
        lock.release()
    for error in [interrupt for _, interrupt in ends] + [error for error, _ in ends]:
        if error is not None:
            raise error


def _wait_for_part(finished: np.ndarray) -> None:
    wait_for_flag(finished, SPIN_LOADS)


def _under(errors: dict[str, str], share: Sequence[Callable[[], None]]) -> Callable[[], None]:
    # one job running ``share`` in order under the calling thread's np.errstate, so a part on a
    # worker warns, raises or stays silent about overflow or 0/0 as the unsplit call would
    def run() -> None:
        with np.errstate(**errors):
            for job in share:
                job()

    return run


def run_pulled(count: int, job: Callable[[int], None]) -> None:
    """``job(0)`` ... ``job(count - 1)``, each once, on this thread and the workers at once: each
    thread takes the next index when its last is done, so a worker the OS leaves waiting (a
    busy machine) takes fewer instead of holding the others at a barrier; the call returns when
    all have run (``run_parts``). Which thread runs an index never changes what it computes.

    Example:
        >>> seen = []
        >>> run_pulled(5, seen.append)
        >>> sorted(seen)
        [0, 1, 2, 3, 4]
    """
    indices, lock = itertools.count(), threading.Lock()

    def pull() -> None:
        while True:
            with lock:
                index = next(indices)
            if index >= count:
                return
            job(index)

    run_parts([pull] * max(1, min(count, threads())))


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
    """How many parts a call with ``work`` units is split into: ``threads()`` when each part
    gets at least ``minimum`` units (below that the hand-off, ~40 us, and the second core's
    share of the memory bandwidth save less than they cost), else 1.

    Example:
        >>> parts_for(10, 1 << 20), parts_for(1 << 22, 1 << 20) == min(threads(), 4)
        (1, True)
    """
    count = owner().threads
    return count if work >= count * minimum else 1


class _Nest:
    """A process-wide BLAS setting around nested uses from any thread: ``first(state)`` runs when
    the first use enters and ``last(state)`` when the last leaves, each under one lock and each
    returning the state kept for the next (what the setting is now)."""

    def __init__(self, first: Callable[[Any], Any], last: Callable[[Any], Any]) -> None:
        self.first, self.last = first, last
        self.lock, self.depth, self.state = threading.Lock(), 0, None

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        with self.lock:
            if self.depth == 0:
                self.state = self.first(self.state)
            self.depth += 1
        try:
            yield
        finally:
            with self.lock:
                self.depth -= 1
                if self.depth == 0:
                    self.state = self.last(self.state)


def _lower(_: Any) -> int | None:
    """OpenBLAS to one thread when no other thread may call BLAS: the count to restore."""
    before = blas.get_threads()
    if before is None or before < 2 or blas_callers():
        return None
    blas.set_threads(1)
    return before


def _restore(before: int | None) -> None:
    if before is not None:
        blas.set_threads(before)


_ON_CALLERS = _Nest(_lower, _restore)


@contextlib.contextmanager
def blas_on_callers() -> Iterator[None]:
    """OpenBLAS's GEMMs on the thread that calls them, inside: for parts that run GEMMs on
    every core at once (two cores' multi-threaded GEMMs would queue on OpenBLAS's level-3 lock).
    Lowering OpenBLAS's count below the threads it has started, and restoring it, only sets the
    count its next calls read (its threads stay). It is lowered only while no other thread may
    call BLAS (``blas_callers``): OpenBLAS rounds by its count (its dot products add per-thread
    partial sums, and its threaded GEMM driver blocks K otherwise than its one-thread driver: a
    64x784x1000 float32 product differs in its last bits on one and two threads), so another
    thread's BLAS call (a user's data thread, a loopback rank) would round by a count that
    changed under it. Otherwise the parts' GEMMs keep OpenBLAS's count: slower, and rounded as
    that count rounds; eager and compiled calls run this same code, so they agree whenever they
    meet the same threads. Nested uses share one lowering: the last to leave restores.

    Example:
        >>> with blas_on_callers():
        ...     blas.get_threads() in (None, 1)
        True
    """
    with _ON_CALLERS.held():
        yield


@contextlib.contextmanager
def gemms_on_every_core() -> Iterator[bool]:
    """Whether GEMM jobs may run on every core at once inside, each GEMM on its caller's thread:
    more than one kernel thread, and OpenBLAS lowered to one thread (``blas_on_callers``). Two
    cores' multi-threaded GEMMs at once queue on OpenBLAS's level-3 lock and wake its sleeping
    threads for each: with one idle user thread alive (which keeps the count up), small-cnn's
    compiled step took 60-160 ms against 31-35 ms. Where it yields False the jobs run one after
    another, each GEMM on OpenBLAS's threads; they round by OpenBLAS's count either way.

    Example:
        >>> with gemms_on_every_core() as concurrent:
        ...     concurrent in (True, False)
        True
    """
    if threads() == 1:
        yield False
        return
    with blas_on_callers():
        yield blas.get_threads() in (None, 1)


def run_pulled_gemms(count: int, job: Callable[[int], None]) -> None:
    """``run_pulled`` for jobs that are GEMMs, where they may run on every core at once
    (``gemms_on_every_core``); else one after another on this thread.

    Example:
        >>> seen = []
        >>> run_pulled_gemms(3, seen.append)
        >>> sorted(seen)
        [0, 1, 2]
    """
    with gemms_on_every_core() as concurrent:
        if concurrent:
            run_pulled(count, job)
            return
    for k in range(count):
        job(k)


def _spin(spinning: bool | None) -> bool:
    """OpenBLAS's own spin, where dualflow owns the setting and no other thread may call BLAS:
    whether its threads spin now."""
    if spinning or blas_callers() or not blas.owns_idle_spin():
        return bool(spinning)
    return blas.set_idle_spin(blas.OPENBLAS_SPIN)


def _sleep(spinning: bool) -> bool:
    """Sleep-at-once again, unless another thread may be in a BLAS call (a change ends
    OpenBLAS's threads): whether they still spin."""
    if not spinning or blas_callers():
        return spinning
    blas.set_idle_spin(blas.SLEEP_AT_ONCE)
    return False


_SPINNING = _Nest(_spin, _sleep)


@contextlib.contextmanager
def blas_spinning() -> Iterator[None]:
    """OpenBLAS's idle threads spin inside (OpenBLAS's own default, 2**28 cycles) instead of
    sleeping at once: for loops that run a GEMM on the calling thread every few microseconds (a
    recurrence's steps, each a small GEMM and a one-thread cell kernel), where each GEMM would
    otherwise wake a sleeping thread. Outside such loops they sleep at once, so that a kernel
    split over both cores never shares one with a spinner (``blas.sleep_when_idle``); the
    loop's own kernels run on the calling thread, beside the spinner, not on its core.

    A change ends OpenBLAS's threads, so it is made only while no other thread may call BLAS
    (``blas_callers``), entering or leaving, and only where dualflow owns the setting (the
    user's ``OPENBLAS_THREAD_TIMEOUT`` stands). The last to leave a nest makes them sleep at
    once again; where another thread has appeared meanwhile they keep spinning until a later
    loop ends alone (a slower kernel, never a broken GEMM). The setting never changes results.

    Example:
        >>> with blas_spinning():
        ...     threads() >= 1
        True
    """
    with _SPINNING.held():
        yield
