"""The kernel worker threads: persistent threads each running the jobs handed to it, then sleeping.

A worker waits for work on a lock (a futex in the kernel, never a spin), so while no kernel call
splits its parts, the threads take no CPU time from OpenBLAS's GEMM threads or anything else.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np

from dualflow._thread_local import ThreadDefaults
from dualflow.background.placement import Placement

IN_WORKER = ThreadDefaults(active=False)  # True on worker threads: their calls run serially


class Worker:
    """A persistent thread that runs the jobs handed to it, one hand-off at a time.

    A plain lock wakes it (``ready``) and an event says its jobs ran (``done``): a
    ``ThreadPoolExecutor`` took ~65 us a call here, with its queue and futures; these ~40 us.
    The event, not a second lock, because an interrupt (Ctrl-C) may land just after a wait
    returned: waiting again on a set event returns at once, where a lock would deadlock.
    ``None`` handed over (``stop``) ends the thread.

    ``finished[0]`` turns 1 as the last thing a hand-off does before the thread sleeps again
    (after ``done``): a caller may watch it with the GIL released (``finish(wait)``) instead of
    sleeping on ``done``, whose wake-up took ~90 us on a KVM guest whose idle core had halted.
    ``crew``: the threads of its crew, the caller's included (``placement.Placement``).
    """

    def __init__(self, index: int, crew: int = 2) -> None:
        self.ready, self.done = threading.Lock(), threading.Event()
        self.ready.acquire()
        self.done.set()
        self.finished = np.ones(1, np.int64)
        self.jobs: Sequence[Callable[[], None]] | None = ()
        self.error: BaseException | None = None
        name = f"dualflow-cpu-{index}"
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self.thread.start()
        self.placement = Placement(self.thread.native_id, crew)

    def _loop(self) -> None:
        IN_WORKER.active = True  # a kernel inside a part runs its own parts serially
        while True:
            self.ready.acquire()  # sleeps in the kernel until a hand-off
            if self.jobs is None:
                self.done.set()
                return
            self._run()
            self.done.set()
            self.finished[0] = 1

    def _run(self) -> None:
        """The jobs handed over, in a frame of their own: when it returns nothing refers to
        them (a loop variable in ``_loop`` kept the last job, its arrays, until the next call)."""
        jobs, self.jobs = self.jobs or (), ()
        try:
            for job in jobs:
                job()
        except BaseException as exc:  # handed back to the caller, which re-raises it
            self.error = exc

    def start(self, jobs: Sequence[Callable[[], None]], caller_cpu: int | None = None) -> None:
        """Hand ``jobs`` over (after any parts an interrupted call left running), to run off
        ``caller_cpu`` (the handing thread's CPU, ``placement.current_cpu``) where given."""
        self.done.wait()  # parts an interrupted call left running finish first (else no wait)
        self.placement.keep_off(caller_cpu)
        self.jobs, self.error = jobs, None
        self.done.clear()
        self.finished[0] = 0
        self.ready.release()

    def finish(
        self, wait: Callable[[np.ndarray], object] | None = None
    ) -> tuple[BaseException | None, BaseException | None]:
        """Wait for the jobs: (the error one raised, an interrupt that came while waiting).
        ``wait(finished)``, when given, runs first where the worker runs off this thread's CPU
        (``placement``): a bounded wait for ``finished[0]`` that releases the GIL
        (``kernels.base.atomics.wait_for_flag``); the event still decides.

        An interrupt does not end the wait: the part still writes its rows of an output that
        a plan may hand to the next step.
        """
        interrupt = None
        while True:
            try:
                # only where the worker runs off this thread's CPU: on a shared one the wait
                # would hold the CPU the worker needs
                if wait is not None and self.placement.apart() and not self.done.is_set():
                    wait, watch = None, wait  # once: an interrupt lands in the event's wait
                    watch(self.finished)
                self.done.wait()
                error, self.error = self.error, None  # raised once, never again
                return error, interrupt
            except BaseException as exc:  # KeyboardInterrupt: keep waiting, then raise it
                interrupt = exc

    def stop(self, timeout: float = 10.0) -> None:
        """End the thread once its current jobs have run, and wait for it (``timeout`` s)."""
        self.start(None)  # type: ignore[arg-type]  # None: the loop returns
        self.thread.join(timeout)


class Crew:
    """``count - 1`` workers (the caller runs a share too), made at the first ``workers()``.

    ``lock`` is held by the call using the crew: another thread's call runs its jobs itself.

    Example:
        >>> crew = Crew(2)
        >>> with crew.lock:
        ...     [w.thread.name for w in crew.workers()]
        ['dualflow-cpu-0']
        >>> crew.stop(); crew.started
        False
    """

    def __init__(self, count: int) -> None:
        self.count = count
        self.lock = threading.Lock()
        self._workers: list[Worker] = []

    @property
    def started(self) -> bool:
        """Whether its threads exist."""
        return bool(self._workers)

    def workers(self) -> list[Worker]:
        """The worker threads, started if need be; call only while holding ``lock``."""
        if not self._workers and self.count > 1:
            self._workers.extend(Worker(k, self.count) for k in range(self.count - 1))
        return self._workers

    def stop(self) -> None:
        """End every worker thread (after the call holding the crew, if any, has finished)."""
        with self.lock:
            workers, self._workers = self._workers, []
            for worker in workers:
                worker.stop()
