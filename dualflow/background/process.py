"""The one owner of the process's background work: kernel worker threads, service processes
(the kernel compile worker and its reader thread), the SIGINT wrapper and OpenBLAS's threads.

Everything starts lazily, at its first use; ``shutdown()`` ends it all (the next use starts it
again); a forked child gets a fresh owner (its parent's threads and pipes are not its own) that
keeps the parent's thread count and SIGINT state.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

from dualflow._config import env_number
from dualflow.background import blas
from dualflow.background.sigint import SigintHold
from dualflow.background.workers import Crew
from dualflow.errors import ConfigError

THREADS_ENV = "DUALFLOW_NUM_THREADS"
MAX_THREADS = 1024
# the owner's own threads: they call BLAS only inside a kernel's parts, while the thread that
# handed the parts out holds the crew and waits, so never while that thread or another decides
# OpenBLAS's threads (a data prefetch thread may call BLAS at any time: user transforms)
NO_BLAS_THREADS = ("dualflow-cpu-", "dualflow-compile-answers", "dualflow-watchdog")
NO_BLAS_THREADS += ("dualflow-peer-reader",)  # the bench's: reads a peer process's lines
# threads of libraries a training loop commonly runs that never call BLAS: (module, class)
NO_BLAS_CLASSES = (("tqdm._monitor", "TMonitor"),)  # a progress bar's refresh thread
# a Jupyter kernel's own threads (messages, heartbeat, history database); user code runs on the
# main thread (or a subshell's, not named here)
NO_BLAS_CLASSES += (
    ("ipykernel.heartbeat", "Heartbeat"),
    ("ipykernel.control", "ControlThread"),
    ("ipykernel.parentpoller", "ParentPollerUnix"),
    ("IPython.core.history", "HistorySavingThread"),
)
NO_BLAS_NAMES = frozenset({"IOPub"})  # ipykernel's IOPub thread: a plain Thread with this name


def blas_callers() -> list[threading.Thread]:
    """The other threads that may be inside a BLAS call now: every thread but this one,
    dualflow's own (``NO_BLAS_THREADS``) and known library threads that never call BLAS (tqdm's
    monitor: a progress bar in the training loop used to keep OpenBLAS's threads spinning for
    the whole run, as ``_tune_blas`` found it and gave up; a Jupyter kernel's threads, alive in
    every notebook: any of these kept OpenBLAS's count up and made convolutions ~1.8x slower).

    Example:
        >>> blas_callers()
        []
    """
    return [
        t
        for t in threading.enumerate()
        if t is not threading.current_thread()
        and not t.name.startswith(NO_BLAS_THREADS)
        and t.name not in NO_BLAS_NAMES
        and (type(t).__module__, type(t).__name__) not in NO_BLAS_CLASSES
    ]


def machine_threads() -> int:
    """The CPUs this process may run on (``os.sched_getaffinity``; ``os.cpu_count`` where the
    platform lacks it).

    Example:
        >>> machine_threads() >= 1
        True
    """
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def configured_threads() -> int | None:
    """``DUALFLOW_NUM_THREADS`` (a whole number in [1, 1024]) or None when unset.

    Raises:
        ConfigError: it is not a whole number in that range.

    Example:
        >>> os.environ["DUALFLOW_NUM_THREADS"] = "1"
        >>> configured_threads()
        1
        >>> del os.environ["DUALFLOW_NUM_THREADS"]
    """
    if not os.environ.get(THREADS_ENV, "").strip():
        return None
    value = env_number(THREADS_ENV, 1, 1, MAX_THREADS, "threads")
    if not value.is_integer():
        text = os.environ[THREADS_ENV]
        raise ConfigError(f"{THREADS_ENV}={text!r} must be a whole number of threads")
    return int(value)


class Background:
    """The background work of one process, configured with ``threads`` parts per kernel call.

    ``explicit`` says the count was set (``set_num_threads`` or the environment), which then
    applies to OpenBLAS's GEMMs too, as ``torch.set_num_threads`` does to its BLAS.
    """

    def __init__(self, threads: int, explicit: bool, sigint: SigintHold | None = None) -> None:
        self.threads, self.explicit = threads, explicit
        self.crew = Crew(threads)
        self.sigint = sigint or SigintHold()
        self._services: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._blas_tuned = False

    def workers(self) -> list:
        """The crew's worker threads, started (and OpenBLAS tuned) at the first call; call only
        while holding ``crew.lock``."""
        if not self.crew.started:
            self.quiet_blas()
        return self.crew.workers()

    def quiet_blas(self) -> None:
        """Make OpenBLAS's idle threads sleep (our workers do too: neither pool takes CPU time
        while the other works), once, before the first thread of ours starts. Only while no
        other thread can be in a BLAS call."""
        if self._blas_tuned:
            return
        self._blas_tuned = True
        if not blas_callers():
            blas.sleep_when_idle()

    def service(self, name: str, choose: Callable[[Any], Any]) -> Any:
        """The service ``name`` (an object with ``close()``): ``choose(current)`` returns the
        one to keep (``current`` itself, a new one, or None); a replaced one is closed."""
        with self._lock:
            current = self._services.get(name)
            chosen = choose(current)
            if chosen is None:
                self._services.pop(name, None)
            else:
                self._services[name] = chosen
        if current is not None and chosen is not current:
            current.close()
        return chosen

    def peek(self, name: str) -> Any:
        """The service ``name`` if one runs, else None (nothing started)."""
        return self._services.get(name)

    def close_services(self) -> None:
        """Close every service (a compile in flight is dropped: store writes are atomic)."""
        with self._lock:
            services, self._services = list(self._services.values()), {}
        for service in services:
            with contextlib.suppress(Exception):
                service.close()

    def shutdown(self) -> None:
        """End the worker threads and services and put the SIGINT handler back."""
        self.close_services()
        self.crew.stop()
        self.sigint.remove()


_owner: list[Background] = []
_owner_lock = threading.Lock()
_blas_default: list[int] = []  # OpenBLAS's own count, before the first explicit setting


def owner() -> Background:
    """This process's owner of background work, made at the first call.

    Example:
        >>> owner() is owner()
        True
    """
    if _owner:
        return _owner[0]
    with _owner_lock:
        if not _owner:
            configured = configured_threads()
            _owner.append(Background(configured or machine_threads(), configured is not None))
            _blas_count(_owner[0])
        return _owner[0]


def replace(threads: int, explicit: bool) -> Background:
    """Shut the owner's threads and services down and put one of ``threads`` in its place
    (``set_num_threads``); OpenBLAS gets ``threads`` too when ``explicit``, else its own count
    back."""
    with _owner_lock:
        old = _owner[0] if _owner else None
        if old is not None:
            old.close_services()
            old.crew.stop()
        _owner[:] = [Background(threads, explicit, old.sigint if old else None)]
    _blas_count(_owner[0])
    return _owner[0]


def _blas_count(work: Background) -> None:
    """OpenBLAS's thread count for ``work``: its count when set explicitly, else OpenBLAS's own
    (from before the first explicit setting)."""
    if work.explicit:
        if not _blas_default:
            _blas_default.append(blas.get_threads() or 0)
        blas.set_threads(work.threads)
    elif _blas_default and _blas_default[0]:
        blas.set_threads(_blas_default[0])


@contextlib.contextmanager
def using_threads(count: int, blas_too: bool = False) -> Iterator[None]:
    """Kernel calls split over ``count`` threads inside (OpenBLAS's GEMMs too when
    ``blas_too``); the setting from before comes back after (tests: 1 and 2 threads).

    Example:
        >>> with using_threads(1):
        ...     owner().threads
        1
    """
    before = owner()
    replace(count, explicit=blas_too)
    try:
        yield
    finally:
        replace(before.threads, before.explicit)


def _after_fork_in_child() -> None:
    # the parent's threads and pipes are not the child's: a fresh owner, same settings
    global _owner_lock
    _owner_lock = threading.Lock()
    if _owner:
        old = _owner[0]
        old.sigint.after_fork()
        _owner[:] = [Background(old.threads, old.explicit, old.sigint)]


def _at_exit() -> None:
    if _owner:
        _owner[0].close_services()


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_at_exit)
