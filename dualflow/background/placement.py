"""Where a split call's worker threads may run: off the CPU of the thread that hands them parts.

A caller that hands a worker its part and later waits for it wakes it, and is woken by it, a
few hundred times a second. Linux's wake-affine placement then moves the two onto one CPU,
and its load balancer leaves them there (each ran moments ago, so each counts as cache-hot):
on a 2-vCPU KVM guest, after ~100 such calls a call of two 0.5 ms parts took 1.0 ms instead of
0.6, 92-98% of calls with both threads on one CPU, and stayed so. Pinning the worker alone made
it worse (the caller, woken by the worker, followed it onto its CPU). So before each hand-off a
worker may run on every CPU the process may use except the caller's current one; the call only
changes the worker's mask when the caller has moved (a system call, ~2 us), and the caller's
own placement is never touched.
"""

from __future__ import annotations

import ctypes
import os


def _sched_getcpu() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    # the process's own symbols (libc's among them): ctypes.util.find_library would run
    # ldconfig in a subprocess at import (~2 ms here, and a process spawned by an import)
    try:
        function = ctypes.CDLL(None).sched_getcpu
    except (OSError, AttributeError):  # not glibc/musl Linux: no placement
        return None
    function.restype, function.argtypes = ctypes.c_int, []
    return function


_GETCPU = _sched_getcpu()


def current_cpu() -> int | None:
    """The CPU this thread runs on now, or None where the platform cannot say.

    Example:
        >>> cpu = current_cpu()
        >>> cpu is None or cpu in os.sched_getaffinity(0)
        True
    """
    if _GETCPU is None:
        return None
    cpu = _GETCPU()
    return cpu if cpu >= 0 else None


class Placement:
    """One worker thread's CPU mask: the process's CPUs (when it was made) less the caller's.

    ``keep_off(cpu)`` is called by the thread that hands the worker parts, with its own CPU;
    any failure (a CPU the mask does not have, a platform without affinity calls, a thread
    that ended) turns placement off for this worker: it then runs wherever the OS puts it.
    So does a crew of more threads (``crew``, the caller's included) than the process has
    CPUs: there every worker kept off the caller's CPU would crowd onto the others.

    Example:
        >>> import threading
        >>> placement = Placement(threading.get_native_id())
        >>> placement.keep_off(None)
        >>> placement.avoided is None
        True
    """

    def __init__(self, native_id: int | None, crew: int = 2) -> None:
        self.native_id = native_id
        try:
            self.allowed: frozenset[int] = frozenset(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            self.allowed = frozenset()
        self.avoided: int | None = None
        self.enabled = native_id is not None and 1 < crew <= len(self.allowed)

    def apart(self) -> bool:
        """Whether the worker was last kept off its caller's CPU (placement works here)."""
        return self.enabled and self.avoided is not None

    def keep_off(self, cpu: int | None) -> None:
        """Let the worker run anywhere allowed but ``cpu`` (nothing when it already does)."""
        if not self.enabled or cpu is None or cpu == self.avoided:
            return
        mask = self.allowed - {cpu}
        if cpu not in self.allowed or not mask:
            return
        try:
            os.sched_setaffinity(self.native_id, mask)
        except (AttributeError, OSError):
            self.enabled = False
            return
        self.avoided = cpu
