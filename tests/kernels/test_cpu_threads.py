"""The CPU kernels' worker threads: splits cover the range once, parts run at once, errors and
nested calls behave."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dualflow.kernels import cpu_threads


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
    cpu_threads.run_parts([outer] * (cpu_threads.THREADS + 2))
    assert len(inner) == 2 * (cpu_threads.THREADS + 2)


def test_parts_for_splits_only_big_enough_work() -> None:
    assert cpu_threads.parts_for(100, 1000) == 1
    assert cpu_threads.parts_for(cpu_threads.THREADS * 1000, 1000) == cpu_threads.THREADS
