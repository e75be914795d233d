"""The background owner: lazily started, ``shutdown`` then reuse starts again, a forked child
gets a fresh owner, and the thread count (machine, environment, ``set_num_threads``) is obeyed."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import dualflow
from dualflow.background import blas, process
from dualflow.background.process import using_threads
from dualflow.errors import ConfigError
from dualflow.kernels.base import cpu_threads

ROOT = Path(__file__).resolve().parent.parent.parent


def _workers_alive() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith("dualflow-cpu-")}


def _threads_used(parts: int) -> set[str]:
    """Names of the threads that ran ``parts`` jobs of one split call (each job waits until
    all have started, so no thread runs two while another is idle)."""
    names: set[str] = set()
    lock = threading.Lock()

    def job() -> None:
        with lock:
            names.add(threading.current_thread().name)

    cpu_threads.run_parts([job] * parts)
    return names


class _Service:
    closed = 0

    def close(self) -> None:
        self.closed += 1


def test_shutdown_then_reuse_starts_again_lazily() -> None:
    with using_threads(2):
        _threads_used(2)
        first = process.owner().crew.workers()[0].thread
        assert first.is_alive() and process.owner().crew.started
        service = process.owner().service("probe", lambda current: current or _Service())
        dualflow.background.shutdown()
        assert not first.is_alive() and not process.owner().crew.started  # joined, not leaked
        assert service.closed == 1 and process.owner().peek("probe") is None
        assert len(_threads_used(2)) == 2  # the next split starts a worker again
        second = process.owner().crew.workers()[0].thread
        assert second is not first and second.is_alive()


def test_a_replaced_service_is_closed_and_a_kept_one_is_not() -> None:
    work = process.owner()
    a = work.service("probe", lambda current: _Service())
    assert work.service("probe", lambda current: current) is a and a.closed == 0
    b = work.service("probe", lambda current: _Service())
    assert a.closed == 1 and b.closed == 0 and work.peek("probe") is b
    work.close_services()
    assert b.closed == 1 and work.peek("probe") is None


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals")
def test_shutdown_puts_the_wrapped_sigint_handler_back() -> None:
    dualflow.background.shutdown()  # earlier compiled calls may have installed the wrapper
    before = signal.getsignal(signal.SIGINT)  # the program's own handler
    sigint = process.owner().sigint
    assert not sigint.installed()
    assert sigint.hold()
    sigint.release()
    assert sigint.installed()
    dualflow.background.shutdown()
    assert signal.getsignal(signal.SIGINT) is before and not sigint.installed()
    assert sigint.hold()  # the next hold wraps it again
    sigint.release()
    assert sigint.installed() and sigint.wrapped is before


def _child_report(queue: object) -> None:
    work = process.owner()
    main = work.sigint.main == threading.get_ident()  # the forking thread holds SIGINT here
    queue.put(
        (work.peek("probe") is None and main, work.crew.started, work.threads, _threads_used(2))
    )


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_gets_a_fresh_owner_with_the_same_count() -> None:
    with using_threads(2):
        _threads_used(2)  # the parent's workers and a service exist before the fork
        process.owner().service("probe", lambda current: current or _Service())
        context = multiprocessing.get_context("fork")
        queue = context.Queue()
        child = context.Process(target=_child_report, args=(queue,))
        child.start()
        no_service, started, threads, used = queue.get(timeout=60)
        child.join(60)
        assert (no_service, started, threads, child.exitcode) == (True, False, 2, 0)
        assert len(used) == 2  # its own worker, started there
        assert process.owner().peek("probe") is not None  # the parent's is untouched
        process.owner().close_services()


@pytest.mark.parametrize("count", [1, 2, 3])
def test_set_num_threads_is_obeyed_by_splits_and_blas(count: int) -> None:
    blas_before = blas.get_threads()
    with using_threads(process.owner().threads):
        dualflow.set_num_threads(count)
        assert dualflow.get_num_threads() == count == cpu_threads.threads()
        assert cpu_threads.parts_for(count * 10, 10) == count
        used = _threads_used(count)
        assert threading.current_thread().name in used and len(used) <= count
        assert len(_workers_alive()) == count - 1  # exactly the crew of this count
        if blas_before is not None:
            assert blas.get_threads() == count  # as torch.set_num_threads: the GEMMs too
    assert blas.get_threads() == blas_before  # its own count back


@pytest.mark.parametrize("bad", [0, -1, 1025, 1.5, "2", True, None])
def test_set_num_threads_refuses_what_is_no_count(bad: object) -> None:
    before = dualflow.get_num_threads()
    with pytest.raises(ConfigError, match=r"set_num_threads\(.*\): the count must be an int"):
        dualflow.set_num_threads(bad)  # type: ignore[arg-type]
    assert dualflow.get_num_threads() == before


def _fresh(code: str, env: dict[str, str]) -> str:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    done = subprocess.run(
        [sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_the_environment_and_the_cpu_affinity_set_the_count() -> None:
    code = "import dualflow; print(dualflow.get_num_threads())"
    with_blas = code[:-1] + ", dualflow.background.blas.get_threads())"
    gemms = "3" if blas.get_threads() is not None else "None"  # OpenBLAS's, from the import on
    assert _fresh(with_blas, {"DUALFLOW_NUM_THREADS": "3"}) == f"3 {gemms}"
    if hasattr(os, "sched_setaffinity"):
        one_cpu = f"import os; os.sched_setaffinity(0, {{{min(os.sched_getaffinity(0))}}}); "
        env = {k: "" for k in ("DUALFLOW_NUM_THREADS",)}
        assert _fresh(one_cpu + code, env) == "1"
        assert _fresh(code, env) == str(len(os.sched_getaffinity(0)))


def test_a_progress_bars_monitor_is_no_blas_caller_but_a_users_thread_is() -> None:
    # a tqdm bar in the training loop starts a monitor thread that never calls BLAS: it must
    # not keep the owner from making OpenBLAS's idle threads sleep (it did, for the whole run)
    import io
    import time

    from tqdm import tqdm

    from dualflow.background.process import blas_callers

    bar = tqdm(total=2, file=io.StringIO())
    user = threading.Thread(target=time.sleep, args=(0.3,))
    user.start()
    try:
        monitors = [t for t in threading.enumerate() if type(t).__name__ == "TMonitor"]
        assert monitors, "tqdm started no monitor thread"
        callers = blas_callers()
        assert user in callers and not set(monitors) & set(callers)
    finally:
        bar.close()
        user.join()


def test_a_jupyter_kernels_threads_are_no_blas_callers() -> None:
    # alive in every notebook: counted as callers, they kept OpenBLAS's count up and made
    # convolutions ~1.8x slower; a thread of the same class name from another module still counts
    import types

    from dualflow.background.process import blas_callers

    def thread_of(module: str, cls_name: str, **kwargs: object) -> threading.Thread:
        cls = types.new_class(cls_name, (threading.Thread,))
        cls.__module__ = module
        return cls(target=stop.wait, daemon=True, **kwargs)

    stop = threading.Event()
    kernel = [
        thread_of("ipykernel.heartbeat", "Heartbeat"),
        thread_of("ipykernel.control", "ControlThread", name="Control"),
        thread_of("IPython.core.history", "HistorySavingThread"),
        threading.Thread(target=stop.wait, name="IOPub", daemon=True),
    ]
    others = [thread_of("mylib.net", "Heartbeat"), threading.Thread(target=stop.wait)]
    for t in kernel + others:
        t.start()
    try:
        callers = set(blas_callers())
        assert not callers & set(kernel) and set(others) <= callers
    finally:
        stop.set()
        for t in kernel + others:
            t.join()
