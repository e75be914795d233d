"""The atomic intrinsics' bounded wait: it sees a flag another thread sets while it waits
(with the GIL released), and gives up after its budget."""

from __future__ import annotations

import threading
import time

import numpy as np

from dualflow.kernels.base.atomics import SPIN_LOADS, wait_for_flag


def test_the_wait_sees_a_flag_set_by_another_thread_while_it_waits() -> None:
    flag = np.zeros(1, np.int64)
    wait_for_flag(flag, 1)  # compiled (or loaded) before the race starts
    started = threading.Event()

    def set_later() -> None:
        started.wait()
        time.sleep(0.005)
        flag[0] = 1  # a plain Python store, as a worker makes it: needs the GIL the wait released

    setter = threading.Thread(target=set_later)
    setter.start()
    started.set()
    began = time.perf_counter()
    seen = wait_for_flag(flag, 1 << 62)  # no budget to speak of: only the flag ends it
    setter.join()
    assert seen
    assert time.perf_counter() - began < 5.0


def test_the_wait_gives_up_after_its_budget() -> None:
    began = time.perf_counter()
    assert not wait_for_flag(np.zeros(1, np.int64), SPIN_LOADS)
    assert wait_for_flag(np.array([3], np.int64), 0) is False  # no loads: nothing was read
    assert time.perf_counter() - began < 5.0
