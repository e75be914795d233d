"""Worker placement: a worker runs off its caller's CPU, changes only when the caller moved,
and turns itself off where the OS refuses."""

from __future__ import annotations

import os
import threading

import pytest

from dualflow.background import placement
from dualflow.background.placement import Placement, current_cpu
from dualflow.background.process import owner
from dualflow.background.workers import Crew
from dualflow.kernels.base import cpu_threads

CPUS = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else frozenset()
needs_two = pytest.mark.skipif(len(CPUS) < 2, reason="needs two CPUs to place threads apart")


class _Parked:
    """A thread that waits until released: a native id whose mask the test may set."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.thread = threading.Thread(target=self.release.wait, daemon=True)
        self.thread.start()

    def mask(self) -> frozenset[int]:
        return frozenset(os.sched_getaffinity(self.thread.native_id))

    def end(self) -> None:
        self.release.set()
        self.thread.join()


def test_current_cpu_is_one_this_process_may_use() -> None:
    cpu = current_cpu()
    assert cpu is None or cpu in CPUS


@needs_two
def test_keep_off_masks_out_the_callers_cpu_and_follows_it() -> None:
    parked = _Parked()
    try:
        place = Placement(parked.thread.native_id)
        first, second = sorted(CPUS)[:2]
        place.keep_off(first)
        assert parked.mask() == CPUS - {first}
        place.keep_off(second)  # the caller moved: the worker may use the first CPU again
        assert parked.mask() == CPUS - {second}
        place.keep_off(None)  # where the platform cannot say: the mask stays
        place.keep_off(max(CPUS) + 1)  # a CPU outside the process's set: the mask stays
        assert parked.mask() == CPUS - {second}
    finally:
        parked.end()


@needs_two
def test_a_refused_mask_turns_placement_off(monkeypatch) -> None:
    calls = []

    def refuse(tid: int, mask: set[int]) -> None:
        calls.append(mask)
        raise OSError("not permitted")

    monkeypatch.setattr(placement.os, "sched_setaffinity", refuse)
    place = Placement(threading.get_native_id())
    place.keep_off(min(CPUS))
    place.keep_off(max(CPUS))
    assert len(calls) == 1 and not place.enabled


@needs_two
@pytest.mark.skipif(cpu_threads.threads() < 2, reason="needs a worker thread")
def test_a_hand_off_keeps_the_worker_off_the_callers_cpu(monkeypatch) -> None:
    """run_parts hands its CPU to the worker: the worker's mask is every CPU but that one, so
    the OS cannot pile the caller and the worker onto one CPU (the results never depend on it)."""
    caller = max(CPUS)
    monkeypatch.setattr(cpu_threads, "current_cpu", lambda: caller)
    seen: list[int] = []
    cpu_threads.run_parts([lambda: None, lambda: seen.append(threading.get_native_id())])
    (worker,) = owner().crew.workers()
    assert seen == [worker.thread.native_id]
    assert frozenset(os.sched_getaffinity(worker.thread.native_id)) == CPUS - {caller}


@needs_two
@pytest.mark.skipif(cpu_threads.threads() < 2, reason="needs a worker thread")
def test_the_caller_watches_the_workers_flag_only_where_they_run_apart(monkeypatch) -> None:
    """Waiting on the flag holds the caller's CPU: only where the worker has another CPU."""
    watched: list[int] = []
    real = cpu_threads._wait_for_part
    monkeypatch.setattr(cpu_threads, "_wait_for_part", lambda f: watched.append(1) or real(f))
    slow = threading.Event()
    cpu_threads.run_parts([lambda: None, lambda: slow.wait(0.05)])
    assert watched == [1]  # the caller's part ended first: it watched the flag, then returned
    (worker,) = owner().crew.workers()
    monkeypatch.setattr(worker.placement, "enabled", False)
    cpu_threads.run_parts([lambda: None, lambda: slow.wait(0.05)])
    assert watched == [1]  # placement off: straight to the event


def test_a_crew_larger_than_the_cpus_is_not_placed() -> None:
    """More threads than CPUs: every worker kept off the caller's CPU would crowd onto the
    rest, and the caller's watch would hold a CPU a worker needs; the OS places them."""
    parked = _Parked()
    try:
        before = parked.mask()
        place = Placement(parked.thread.native_id, crew=len(CPUS) + 1)
        place.keep_off(min(CPUS))
        assert not place.enabled and not place.apart() and parked.mask() == before
    finally:
        parked.end()
    crew = Crew(len(CPUS) + 1)
    with crew.lock:
        assert not any(w.placement.enabled for w in crew.workers())
    crew.stop()
