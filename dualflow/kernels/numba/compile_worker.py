"""The process that compiles fused numba kernels for this one, and how this one talks to it.

One worker per process (``python -m dualflow.kernels.numba.compile_worker <store>``, at a lower
priority), started at the first kernel asked for: at a plan's lowering. Requests are plain JSON
lines (a program's expression, dtypes and shapes, never source text); the worker renders the
kernel from them as the caller would, compiles it, saves the machine code signed in the kernels
store and answers the request's number. It only fills the cache (``background_compile``). The
worker and its reader thread are a service of ``dualflow.background``'s owner, which ends them
at ``shutdown()`` and at exit, and whose fresh copy in a forked child starts its own.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from dualflow._config import env_flag
from dualflow.background.process import owner
from dualflow.kernels.numba import kernel_requests

ENV = "DUALFLOW_BACKGROUND_COMPILE"
_enabled = env_flag(ENV, default=True)
_paused = 0  # ``synchronous()`` depth: ``cache warm`` compiles its kernels itself
SERVICE = "compile-worker"  # its name among the background owner's services
NICE = 10  # the worker's priority: the caller's trace and steps come first
MAX_DEATHS = 3  # workers that ended unasked, after which kernels compile in this process
_deaths: list[int] = []


class Job:
    """One kernel's outstanding requests (the kernel and each in-place variant seen)."""

    def __init__(self) -> None:
        self.outstanding = 0
        self.variants: set[int] = set()


class Worker:
    """The worker process and the thread reading its answers."""

    def __init__(self, directory: Path) -> None:
        env = dict(
            os.environ, **{ENV: "0", "OPENBLAS_NUM_THREADS": "1", "DUALFLOW_NUM_THREADS": "1"}
        )
        command = [sys.executable, "-m", "dualflow.kernels.numba.compile_worker", str(directory)]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        with contextlib.suppress(OSError):  # at once: its imports already compete with the steps
            os.setpriority(os.PRIO_PROCESS, self.process.pid, NICE)
        self.directory = directory
        self.idents = itertools.count(1)
        self.jobs: dict[int, Job] = {}
        self.done = threading.Condition()
        self.writing = threading.Lock()  # one line at a time (loopback ranks lower in threads)
        self.alive, self.closing = True, False
        threading.Thread(target=self._read, name="dualflow-compile-answers", daemon=True).start()

    def ask(self, job: Job, request: list) -> None:
        """Send one request for ``job`` (its answer decrements ``job.outstanding``)."""
        with self.done:
            if not self.alive:
                return
            ident = next(self.idents)
            self.jobs[ident] = job
            job.outstanding += 1
        try:
            with self.writing:
                self.process.stdin.write(json.dumps([ident, *request]) + "\n")
                self.process.stdin.flush()
        except (OSError, ValueError):  # the worker is gone: the kernel compiles here
            self._finish(ident)

    def _finish(self, ident: int) -> None:
        with self.done:
            job = self.jobs.pop(ident, None)
            if job is not None:
                job.outstanding -= 1
            self.done.notify_all()

    def _read(self) -> None:
        for line in self.process.stdout:
            with contextlib.suppress(ValueError):
                self._finish(int(line.split()[0]))
        with self.done:  # the worker ended: every kernel still asked for compiles here
            if not self.closing:
                _deaths.append(self.process.pid)
            self.alive = False
            for ident in list(self.jobs):
                self._finish(ident)

    def close(self) -> None:
        """End the worker (a compile in flight is dropped: store writes are atomic)."""
        self.closing = True
        with contextlib.suppress(OSError, ValueError):
            self.process.stdin.close()
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            self.process.terminate()
            self.process.wait(timeout=5)


def worker_for(directory: Path) -> Worker | None:
    """The running worker for the kernels store at ``directory``, started if need be; None when
    it cannot be (then kernels compile in this process). The background owner holds it: its
    ``shutdown()`` ends it, and a forked child starts its own.

    Example:
        >>> from dualflow.disk_cache import open_store
        >>> worker = worker_for(open_store("kernels").directory)
        >>> worker is None or worker is worker_for(worker.directory)
        True
    """

    def choose(current: Worker | None) -> Worker | None:
        if current is not None and current.alive and current.directory == directory:
            return current
        if len(_deaths) >= MAX_DEATHS:
            return current
        try:
            return Worker(directory)
        except OSError:
            return current

    worker = owner().service(SERVICE, choose)
    usable = worker is not None and worker.alive and worker.directory == directory
    return worker if usable else None


@contextlib.contextmanager
def synchronous() -> Iterator[None]:
    """Compile kernels in this process while inside (``cache warm``: filling the store is its job).

    Example:
        >>> with synchronous():
        ...     active()
        False
    """
    global _paused
    _paused += 1
    try:
        yield
    finally:
        _paused -= 1


def active() -> bool:
    """Whether kernels compile in the worker now (on unless ``DUALFLOW_BACKGROUND_COMPILE=0`` or
    inside ``synchronous``).

    Example:
        >>> active() in (True, False)
        True
    """
    return _enabled and not _paused


def wait(timeout: float | None = None) -> bool:
    """Wait until the worker has answered every request; False when ``timeout`` (s) ran out first.

    Example:
        >>> wait(0.0) or pending() > 0
        True
    """
    worker = _current()
    if worker is None:
        return True
    with worker.done:
        return worker.done.wait_for(lambda: not worker.jobs, timeout)


def pending() -> int:
    """Requests the worker has not answered yet.

    Example:
        >>> pending() >= 0
        True
    """
    worker = _current()
    return 0 if worker is None else len(worker.jobs)


def _current() -> Worker | None:
    """This process's worker, if it runs (a forked child's owner holds none of its parent's)."""
    return owner().peek(SERVICE)


def _serve(directory: str) -> None:
    """The worker: compile each request read from stdin into the store at ``directory``, sums
    first (their callers wait), answering its number when done (or failed: the caller then
    compiles it itself)."""
    kernel_requests.use_store(Path(directory))
    requests: queue.PriorityQueue = queue.PriorityQueue()

    def read() -> None:
        for n, line in enumerate(sys.stdin):
            with contextlib.suppress(ValueError, TypeError, IndexError):  # not a request: skipped
                ident, *request = json.loads(line)
                requests.put((request[6] != "sum", n, int(ident), request))
        requests.put((-1, 0, None, None))  # the caller is gone: what it asked for is moot

    threading.Thread(target=read, daemon=True).start()
    while True:
        _, _, ident, request = requests.get()
        if ident is None:
            return
        with contextlib.suppress(Exception):
            kernel_requests.build(request)
        print(ident, flush=True)


if __name__ == "__main__":
    _serve(sys.argv[1])
