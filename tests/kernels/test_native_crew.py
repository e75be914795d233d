"""The native crew: threads started by ``pthread_create`` that run compiled parts without the
GIL, woken through futexes; their lifetime follows the background owner (shutdown, thread
counts, fork)."""

from __future__ import annotations

import multiprocessing
import time

import numpy as np
import pytest

from dualflow.background import process
from dualflow.kernels.base import native_crew
from dualflow.kernels.base.native_crew import (
    DONE,
    LINGER,
    LINGER_S,
    POSTED,
    SLEEPING,
    NativeCrew,
    entry_address,
    post,
    wait_done,
)

pytestmark = pytest.mark.skipif(not native_crew._SUPPORTED, reason="Linux x86-64/aarch64 only")
EMPTY = entry_address(native_crew._empty_entry)


def test_parts_run_on_every_worker_in_order_of_posting() -> None:
    crew = NativeCrew(2)
    try:
        block = np.zeros(1, np.int64)
        with crew.lock:
            for _ in range(100):
                crew.run(EMPTY, block)
        assert block[0] == 200  # each run: one part on each of the two workers
        assert all(ctl[POSTED] == ctl[DONE] == 100 for ctl in crew.ctls)
        assert all(p.apart() in (True, False) for p in crew.placements)
    finally:
        crew.close()
    assert crew.closed


def _until_asleep(crew: NativeCrew) -> None:
    deadline = time.monotonic() + 5.0
    while crew.awake() and time.monotonic() < deadline:  # it lingers, then sleeps
        time.sleep(LINGER_S)
    assert not crew.awake() and crew.ctls[0, SLEEPING] == 1


def test_a_sleeping_worker_is_woken_by_a_post_and_wakes_a_sleeping_caller() -> None:
    crew = NativeCrew(1)
    try:
        _until_asleep(crew)
        block = np.zeros(1, np.int64)
        number = post(crew.ctls[0], EMPTY, block)
        wait_done(crew.ctls[0], number, 1)  # one watch: the caller sleeps until woken
        assert block[0] == 1 and crew.ctls[0, DONE] == number
    finally:
        crew.close()


def test_a_nudge_wakes_a_sleeping_worker_without_work() -> None:
    crew = NativeCrew(1)
    try:
        _until_asleep(crew)
        crew.ctls[0, LINGER] = 1 << 50  # once woken it watches until the next post: no race
        crew.nudge()
        deadline = time.monotonic() + 5.0
        while not crew.awake() and time.monotonic() < deadline:
            time.sleep(1e-5)
        assert crew.awake()  # watching again, for another linger
        assert crew.ctls[0, POSTED] == crew.ctls[0, DONE] == 0  # and it ran nothing
        block = np.zeros(1, np.int64)
        wait_done(crew.ctls[0], post(crew.ctls[0], EMPTY, block), 1 << 20)
        assert block[0] == 1  # the next part runs as ever
    finally:
        crew.close()
    crew.nudge()  # a closed crew: nothing to wake, no error


def test_the_crew_follows_the_owner_thread_count_and_shutdown() -> None:
    with process.using_threads(1):
        assert native_crew.crew() is None  # one thread: nothing splits
    with process.using_threads(3):
        three = native_crew.crew()
        assert three is not None and len(three.ctls) == 2
    with process.using_threads(2):
        two = native_crew.crew()
        assert two is not None and len(two.ctls) == 1
        process.owner().shutdown()  # a service of the owner: stopped and joined
        assert two.closed
        again = native_crew.crew()
        assert again is not None and again is not two and not again.closed


def test_disabled_by_the_environment_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native_crew, "_enabled", False)
    assert native_crew.crew() is None


def _child_runs_a_part(queue: multiprocessing.Queue) -> None:
    crew = native_crew.crew()
    block = np.zeros(1, np.int64)
    with crew.lock:
        crew.run(EMPTY, block)
    queue.put(int(block[0]))


def test_a_forked_child_starts_a_crew_of_its_own() -> None:
    with process.using_threads(2):
        parent = native_crew.crew()
        assert parent is not None
        context = multiprocessing.get_context("fork")
        queue = context.Queue()
        child = context.Process(target=_child_runs_a_part, args=(queue,))
        child.start()
        child.join(60)
        assert child.exitcode == 0 and queue.get(timeout=5) == 1
        block = np.zeros(1, np.int64)
        with parent.lock:
            parent.run(EMPTY, block)
        assert block[0] == 1 and not parent.closed


def test_a_worker_on_the_callers_cpu_still_runs_its_part() -> None:
    # the OS may put a worker on the caller's CPU (placement moves it off at the next split):
    # the caller's watch yields that CPU, so the part runs (it had waited out a whole time slice)
    import os

    crew = NativeCrew(1)
    allowed = os.sched_getaffinity(0)
    try:
        cpu = min(allowed)
        os.sched_setaffinity(0, {cpu})
        os.sched_setaffinity(int(crew.ctls[0, native_crew.TID]), {cpu})
        block = np.zeros(1, np.int64)
        with crew.lock:
            for _ in range(50):
                crew.run(EMPTY, block)
        assert block[0] == 50
    finally:
        os.sched_setaffinity(0, allowed)
        crew.close()


def test_threads_that_cannot_start_leave_the_python_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_threads(count, lock=None):
        raise OSError(11, "native_crew: pthread_create failed")

    monkeypatch.setattr(native_crew, "NativeCrew", no_threads)
    monkeypatch.setattr(native_crew, "_failed", False)
    with process.using_threads(2):  # a fresh owner: no crew yet
        with pytest.warns(RuntimeWarning, match="native kernel threads could not start"):
            assert native_crew.crew() is None
        assert native_crew.crew() is None  # not tried again, not said again
        from dualflow.kernels.expr.typed_program import lower_expr
        from dualflow.kernels.numba import numba_elementwise

        x = np.arange(50_000, dtype=np.float32)
        program = lower_expr(("call", "negative", ("var", "a0")), ("a0",), ("float32",))
        kernel = numba_elementwise.numba_kernel(program, (x.shape,), x.shape)
        assert kernel(np, x).tobytes() == (-x).tobytes()


def test_a_model_is_measured_once_holding_the_threads_and_never_while_busy() -> None:
    crew = NativeCrew(1)
    calls: list[bool] = []

    def measure() -> float:
        calls.append(crew.lock.locked())  # measured while holding the crew's threads
        return 1.5

    try:
        with crew.lock:  # another call holds the threads: nothing measured, asked again later
            assert crew.measured_once("m", measure) is None
        assert crew.measured_once("none", lambda: None) is None  # no value: not kept
        assert crew.measured_once("none", lambda: 2.0) == 2.0
        assert [crew.measured_once("m", measure) for _ in range(3)] == [1.5] * 3
        assert calls == [True]
    finally:
        crew.close()
    assert crew.measured_once("closed", measure) is None and calls == [True]
