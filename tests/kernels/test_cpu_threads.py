"""The CPU kernels' worker threads: splits cover the range once, parts run at once, errors and
nested calls behave."""

from __future__ import annotations

import _thread
import multiprocessing
import os
import threading
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dualflow.kernels.base import cpu_threads


@given(st.integers(0, 10_000), st.integers(1, 8))
def test_split_covers_the_range_once_in_order(n: int, parts: int) -> None:
    ranges = cpu_threads.split(n, parts)
    covered = [i for a, b in ranges for i in range(a, b)]
    assert covered == list(range(n))
    assert len(ranges) == min(parts, n)
    if ranges:
        lengths = [b - a for a, b in ranges]
        assert max(lengths) - min(lengths) <= 1


def test_run_parts_runs_every_job_and_one_on_the_caller() -> None:
    names: list[str] = []
    lock = threading.Lock()

    def job() -> None:
        with lock:
            names.append(threading.current_thread().name)

    cpu_threads.run_parts([job] * 3)
    assert len(names) == 3
    assert threading.current_thread().name in names


def test_run_parts_waits_for_all_and_reraises_a_parts_error() -> None:
    done = threading.Event()

    def slow() -> None:
        done.wait(0.05)
        done.set()

    def bad() -> None:
        raise ValueError("part 2 failed")

    with pytest.raises(ValueError, match="part 2 failed"):
        cpu_threads.run_parts([slow, bad])
    assert done.is_set()  # the first part finished before the error came back


def test_nested_run_parts_inside_a_worker_runs_serially() -> None:
    inner: list[bool] = []

    def outer() -> None:
        cpu_threads.run_parts([lambda: inner.append(True)] * 2)

    # more outer jobs than workers: nested calls waiting on the pool would deadlock
    cpu_threads.run_parts([outer] * (cpu_threads.threads() + 2))
    assert len(inner) == 2 * (cpu_threads.threads() + 2)


def test_parts_for_splits_only_big_enough_work() -> None:
    assert cpu_threads.parts_for(100, 1000) == 1
    assert cpu_threads.parts_for(cpu_threads.threads() * 1000, 1000) == cpu_threads.threads()


def test_the_workers_persist_between_calls() -> None:
    names: list[set[str]] = []
    for _ in range(3):
        seen: set[str] = set()
        cpu_threads.run_parts([lambda s=seen: s.add(threading.current_thread().name)] * 2)
        names.append(seen - {threading.current_thread().name})
    if cpu_threads.threads() > 1:
        assert names[0] and names[0] == names[1] == names[2]


def test_calls_from_two_threads_at_once_each_run_all_their_jobs() -> None:
    """While one call holds the workers, another thread's call runs its jobs itself (never
    waits for a worker, never runs a job twice or drops one)."""
    counts = [[0] * 4 for _ in range(2)]
    release = threading.Event()

    def job(caller: int, k: int) -> None:
        counts[caller][k] += 1
        release.wait(0.02)

    def call(caller: int) -> None:
        for _ in range(25):
            cpu_threads.run_parts([lambda c=caller, k=k: job(c, k) for k in range(4)])

    threads = [threading.Thread(target=call, args=(c,)) for c in range(2)]
    for t in threads:
        t.start()
    release.set()
    for t in threads:
        t.join(30)
    assert counts == [[25] * 4, [25] * 4]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_makes_its_own_workers() -> None:
    cpu_threads.run_parts([lambda: None] * 2)  # the parent's workers exist before the fork
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as pool:
        result = pool.apply_async(_split_sum, (1000,))
        assert result.get(timeout=60) == sum(range(1000))


def _split_sum(n: int) -> int:
    totals = [0, 0]
    halves = cpu_threads.split(n, 2)
    cpu_threads.run_parts(
        [
            lambda k=k, a=a, b=b: totals.__setitem__(k, sum(range(a, b)))
            for k, (a, b) in enumerate(halves)
        ]
    )
    return sum(totals)


@pytest.mark.skipif(cpu_threads.threads() < 2, reason="needs a worker thread")
def test_an_interrupt_while_waiting_still_waits_for_the_workers_part() -> None:
    """Ctrl-C while the caller waits: the worker's part still writes its rows, so the call
    waits for it, then raises the interrupt; the next call's hand-off is not confused."""
    finished = threading.Event()

    def workers_part() -> None:
        _thread.interrupt_main()  # the caller is (or soon will be) waiting for this part
        time.sleep(0.2)
        finished.set()

    with pytest.raises(KeyboardInterrupt):
        cpu_threads.run_parts([lambda: None, workers_part])
    assert finished.is_set()
    rows = [0, 0]

    def slow_part() -> None:
        time.sleep(0.1)
        rows[1] = 2

    cpu_threads.run_parts([lambda: rows.__setitem__(0, 1), slow_part])
    assert rows == [1, 2]  # returned only after the worker's part ran


def test_every_part_runs_under_the_callers_numpy_error_state() -> None:
    # numpy's error state is per thread: a part on a worker must overflow as the unsplit call
    # would under the caller's np.errstate (raise, or stay silent), not by the worker's default
    import warnings

    import numpy as np

    big = np.full(4, 3e38, np.float32)

    def overflow() -> None:
        big * np.float32(10)

    with np.errstate(over="raise"), pytest.raises(FloatingPointError):
        cpu_threads.run_parts([overflow] * 4)
    with np.errstate(over="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")  # a worker's RuntimeWarning would fail here
        cpu_threads.run_parts([overflow] * 4)
    seen = []
    with np.errstate(divide="raise", invalid="warn"):
        cpu_threads.run_parts([lambda: seen.append(np.geterr())] * 4)
    assert all(e["divide"] == "raise" and e["invalid"] == "warn" for e in seen) and len(seen) == 4


def test_run_pulled_runs_each_index_once_and_a_slow_thread_takes_fewer() -> None:
    seen, lock = [], threading.Lock()

    def job(i: int) -> None:
        if threading.current_thread() is not threading.main_thread():
            time.sleep(0.1)  # a worker the OS leaves waiting: the caller pulls the rest
        with lock:
            seen.append((i, threading.current_thread() is threading.main_thread()))

    cpu_threads.run_pulled(12, job)
    assert sorted(i for i, _ in seen) == list(range(12))
    if cpu_threads.threads() > 1:
        assert sum(main for _, main in seen) > 6  # the caller ran more than an even share


def test_run_pulled_reraises_a_jobs_error_after_all_have_stopped() -> None:
    ran = []

    def job(i: int) -> None:
        if i == 3:
            raise ValueError("index 3")
        ran.append(i)

    with pytest.raises(ValueError, match="index 3"):
        cpu_threads.run_pulled(8, job)
    assert 3 not in ran and len(ran) >= 1


def test_blas_stays_on_its_threads_while_another_thread_may_call_it() -> None:
    # OpenBLAS's level-1 calls add per-thread partial sums: a user's thread (or a loopback
    # rank) must never see the count change under it, so parts keep OpenBLAS's count then
    from dualflow.background import blas

    before = blas.get_threads()
    if before is None or before < 2:
        pytest.skip("numpy's BLAS is not a multi-threaded OpenBLAS here")
    with cpu_threads.blas_on_callers():
        assert blas.get_threads() == 1  # alone: the parts' GEMMs run on their callers
    assert blas.get_threads() == before
    stop = threading.Event()
    user = threading.Thread(target=stop.wait)
    user.start()
    try:
        with cpu_threads.blas_on_callers():
            assert blas.get_threads() == before
    finally:
        stop.set()
        user.join()


def test_gemm_jobs_run_one_after_another_where_blas_keeps_its_threads(monkeypatch) -> None:
    # two cores' multi-threaded GEMMs at once queue on OpenBLAS's lock: with the count kept up
    # by another thread, the jobs run on this thread, each GEMM on OpenBLAS's threads
    from dualflow.background import blas
    from dualflow.background.process import using_threads

    before = blas.get_threads()
    if before is None or before < 2:
        pytest.skip("numpy's BLAS is not a multi-threaded OpenBLAS here")

    def where(count: int) -> list[str]:
        ran: list[tuple[int, str]] = []
        cpu_threads.run_pulled_gemms(
            count, lambda k: ran.append((k, threading.current_thread().name))
        )
        assert sorted(k for k, _ in ran) == list(range(count))
        return [name for _, name in ran]

    pulled = []
    real = cpu_threads.run_pulled
    monkeypatch.setattr(cpu_threads, "run_pulled", lambda n, job: pulled.append(n) or real(n, job))
    with using_threads(2):
        where(40)
        assert pulled == [40]  # alone: pulled by every thread, OpenBLAS on one each
        stop = threading.Event()
        user = threading.Thread(target=stop.wait, name="user-data")
        user.start()
        try:
            assert set(where(40)) == {threading.current_thread().name} and pulled == [40]
        finally:
            stop.set()
            user.join()


@pytest.fixture
def spin_changes(monkeypatch):
    """The idle spins ``blas_spinning`` sets, recorded instead of set (dualflow owning it)."""
    from dualflow.background import blas

    changes: list[str] = []
    monkeypatch.setattr(blas, "owns_idle_spin", lambda: True)
    monkeypatch.setattr(blas, "set_idle_spin", lambda exponent: changes.append(exponent) or True)
    yield changes
    cpu_threads._SPINNING.state = False  # nothing was set for real


def test_recurrences_keep_openblas_awake_only_inside_and_sleep_it_after(spin_changes) -> None:
    from dualflow.background import blas
    from dualflow.kernels.linalg.lstm_forward import lstm_forward

    with cpu_threads.blas_spinning():
        with cpu_threads.blas_spinning():  # nested: one change, undone by the last to leave
            assert spin_changes == [blas.OPENBLAS_SPIN]
        assert spin_changes == [blas.OPENBLAS_SPIN]
    assert spin_changes == [blas.OPENBLAS_SPIN, blas.SLEEP_AT_ONCE]
    spin_changes.clear()
    f32 = np.float32
    lstm_forward(
        np.zeros((3, 2, 8), f32), np.zeros((2, 2), f32), np.zeros((2, 2), f32), np.ones((8, 2), f32)
    )
    assert spin_changes == [blas.OPENBLAS_SPIN, blas.SLEEP_AT_ONCE]  # around its steps


def test_the_spin_stays_while_another_thread_may_call_blas_or_the_user_set_it(
    spin_changes, monkeypatch
) -> None:
    from dualflow.background import blas

    stop = threading.Event()
    user = threading.Thread(target=stop.wait)
    user.start()
    try:  # changing the spin ends OpenBLAS's threads: never under another caller's GEMM
        with cpu_threads.blas_spinning():
            pass
        assert spin_changes == []
        stop.set()
        user.join()
        with cpu_threads.blas_spinning():  # alone on entry, another thread by the exit
            assert spin_changes == [blas.OPENBLAS_SPIN]
            stop.clear()
            user = threading.Thread(target=stop.wait)
            user.start()
        assert spin_changes == [blas.OPENBLAS_SPIN]  # kept spinning: not ended under it
    finally:
        stop.set()
        user.join()
    with cpu_threads.blas_spinning():  # alone again: the next loop's end makes them sleep
        pass
    assert spin_changes == [blas.OPENBLAS_SPIN, blas.SLEEP_AT_ONCE]
    spin_changes.clear()
    monkeypatch.setattr(blas, "owns_idle_spin", lambda: False)  # the user's timeout, or none
    with cpu_threads.blas_spinning():
        pass
    assert spin_changes == []
