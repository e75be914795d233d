"""Threads that run parts of compiled kernels without the GIL, handed work through shared memory.

``cpu_threads``' workers are Python threads: each hand-off wakes one from a lock and has it take
the GIL, and on a KVM guest whose idle CPUs halt at once (``guest_halt_poll_ns`` 0) every such
wake costs 30-90 us. A split 256K-element float32 add then took 100-110 us against 75 us on one
thread, while numba's OpenMP pool (threads that spin between regions) took 19.5 us: both halves
then stay in their core's L2. The threads here are started by ``pthread_create`` on a compiled
loop (``_serve``, numba's C wrapper of it) and never enter the interpreter. A hand-off is
numbers in the worker's control words (``ctl``): an entry point's address and the address of a
block of operand addresses and sizes, then ``POSTED`` is raised. The worker watches ``POSTED``
for ``LINGER_S`` after each part (with a spin hint, yielding its CPU every ``YIELD_EVERY``
watches to any other thread that wants it), then sleeps on a futex; a caller that finds it
asleep wakes it. The caller runs a share itself and watches ``DONE`` the
same way. A generated kernel module's ``split`` does all of it in one ``nogil`` call
(``numba_elementwise``), its ``entry`` is what the worker calls.

Linux on x86-64 and aarch64 only (their system call numbers); elsewhere ``crew()`` is None
and kernels split over ``cpu_threads`` as before. The control words live in memory that is never
freed (a worker may read them until it has stopped); the crew is a service of the background
owner, stopped and joined at ``shutdown()`` and at exit, never inherited by a forked child.
"""

from __future__ import annotations

import ctypes
import hashlib
import platform
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba
import numpy as np
from numba import types

from dualflow._config import env_flag
from dualflow.background.placement import Placement
from dualflow.background.process import owner
from dualflow.kernels.base import atomics, native_calls
from dualflow.kernels.base.atomics import atomic_add, atomic_load, cpu_relax
from dualflow.kernels.base.native_calls import (
    BLOCK_TYPE,
    address_of,
    as_voidptr,
    atomic_store,
    call_entry,
    syscall,
)
from dualflow.kernels.base.numba_cache import in_kernels_store
from dualflow.kernels.base.per_machine import least_seconds

# (futex, gettid, sched_yield) system call numbers where the crew runs
SYSCALLS = {"x86_64": (202, 186, 24), "aarch64": (98, 178, 124)}
FUTEX_WAIT, FUTEX_WAKE = 128, 129  # the _PRIVATE variants: one process's threads
# control words of one worker (a row of ``WORDS``, two cache lines)
POSTED, DONE, ENTRY, BLOCK, SLEEPING, CALLER_SLEEPING, STOP, SYSCALL, FUTEX, GETTID = range(10)
LINGER, TID, BLOCK_LEN, SCHED_YIELD = 10, 11, 12, 13
YIELD_EVERY = 64
"""Watches (each with a spin hint, ~10 ns) between two ``sched_yield`` calls while a worker
lingers: a thread of another pool woken on its CPU (OpenBLAS's, ``cpu_threads``') runs within
a microsecond instead of sharing the CPU with the watch for the rest of the linger."""
WORDS = 16
LINGER_S = 1e-3
"""How long a worker watches for the next part before it sleeps: through a GEMM of up to ~1 ms
on OpenBLAS's threads (the MLP's), so the split after it needs no wake-up (30-90 us on a KVM
guest whose idle CPUs halt; 200 us made the MLP step 3-7% slower, design notes, seventeenth
session). While it watches it yields its CPU to any other thread (``YIELD_EVERY``)."""
CALLER_WAIT_S = 1e-3  # the caller's watch for a worker's part, before it sleeps on the futex
SERVICE = "native-crew"
ENV = "DUALFLOW_NATIVE_THREADS"
_enabled = env_flag(ENV, default=True)
DIGEST = hashlib.sha256(
    b"".join(Path(m.__file__).read_bytes() for m in (sys.modules[__name__], native_calls, atomics))
).hexdigest()[:16]
"""A digest of the code compiled here and of the intrinsics it inlines: the kernels' stems, and
the import comment of generated kernels that call ``post`` and ``wait_done`` (a kernel's cache
key hashes its own bytecode only)."""


def _kernel(py_func: Any) -> Any:
    # compiled as the fixed kernels are, machine code in the signed kernels store
    kernel = numba.njit(nogil=True, cache=False, error_model="numpy")(py_func)
    in_kernels_store(kernel, f"k_native{py_func.__name__}_{DIGEST}")
    return kernel


@_kernel
def _futex(ctl: np.ndarray, word: int, op: int, value: int) -> None:  # pragma: no cover
    syscall(ctl[SYSCALL], ctl[FUTEX], address_of(ctl, word), op, value & 0xFFFFFFFF)


@_kernel
def _await_post(ctl: np.ndarray, seen: int) -> int:  # pragma: no cover - runs compiled
    # the next posted number: watched for LINGER loads, then slept for
    spins = 0
    while atomic_load(ctl, POSTED) == seen:
        cpu_relax()
        spins += 1
        if spins % YIELD_EVERY == 0:  # a thread of another pool waiting for this CPU runs
            syscall(ctl[SYSCALL], ctl[SCHED_YIELD], 0, 0, 0)
        if spins >= ctl[LINGER]:
            atomic_store(ctl, SLEEPING, 1)
            if atomic_load(ctl, POSTED) == seen:  # a post after this store sees SLEEPING
                _futex(ctl, POSTED, FUTEX_WAIT, seen)
            atomic_store(ctl, SLEEPING, 0)
            spins = 0
    return atomic_load(ctl, POSTED)


@_kernel
def _serve(arg: Any) -> Any:  # pragma: no cover - runs compiled, on a thread of its own
    ctl = numba.carray(arg, (WORDS,), np.int64)
    atomic_store(ctl, TID, syscall(ctl[SYSCALL], ctl[GETTID], 0, 0, 0))
    seen = 0
    while True:
        seen = _await_post(ctl, seen)
        if atomic_load(ctl, STOP) != 0:
            break
        block = numba.carray(as_voidptr(atomic_load(ctl, BLOCK)), (ctl[BLOCK_LEN],), np.int64)
        call_entry(atomic_load(ctl, ENTRY), block)
        atomic_store(ctl, DONE, seen)
        if atomic_load(ctl, CALLER_SLEEPING) != 0:
            _futex(ctl, DONE, FUTEX_WAKE, 1)
    atomic_store(ctl, DONE, seen)
    _futex(ctl, DONE, FUTEX_WAKE, 1)
    return as_voidptr(0)


@_kernel
def post(ctl: np.ndarray, entry: int, block: np.ndarray) -> int:  # pragma: no cover - compiled
    """Hand ``entry(block)`` (an entry point's address, ``entry_address``) to the worker of the
    control words ``ctl``, waking it if it sleeps; returns the part's number for ``wait_done``.
    ``block`` must outlive the part: the caller waits for it before it returns.

    Example:
        >>> crew, block = NativeCrew(1), np.zeros(1, np.int64)
        >>> number = post(crew.ctls[0], entry_address(_empty_entry), block)
        >>> wait_done(crew.ctls[0], number, 1 << 20); block.tolist()
        [1]
        >>> crew.close()
    """
    ctl[ENTRY] = entry
    ctl[BLOCK_LEN] = block.shape[0]
    atomic_store(ctl, BLOCK, address_of(block, 0))
    posted = atomic_add(ctl, POSTED, 1) + 1
    if atomic_load(ctl, SLEEPING) != 0:  # it sleeps (or is about to: the futex sees POSTED)
        _futex(ctl, POSTED, FUTEX_WAKE, 1)
    return posted


@_kernel
def wait_done(ctl: np.ndarray, posted: int, spins: int) -> None:  # pragma: no cover - compiled
    """Return once the worker of ``ctl`` has run part ``posted``: ``spins`` watches of its
    ``DONE`` word, then a sleep on the futex until the worker wakes this thread (``post``).

    Example:
        >>> crew = NativeCrew(1)
        >>> wait_done(crew.ctls[0], 0, 1)  # part 0: none was posted, nothing to wait for
        >>> crew.close()
    """
    count = 0
    while atomic_load(ctl, DONE) < posted:
        cpu_relax()
        count += 1
        if count % YIELD_EVERY == 0:  # a worker the OS put on this CPU runs its part
            syscall(ctl[SYSCALL], ctl[SCHED_YIELD], 0, 0, 0)
        if count >= spins:
            atomic_store(ctl, CALLER_SLEEPING, 1)
            done = atomic_load(ctl, DONE)
            if done < posted:  # the worker's store after this one sees CALLER_SLEEPING
                _futex(ctl, DONE, FUTEX_WAIT, done)
            atomic_store(ctl, CALLER_SLEEPING, 0)
            count = 0


@_kernel
def _spin(ctl: np.ndarray, loads: int) -> int:  # pragma: no cover - runs compiled
    # ``loads`` watches of a word nobody writes, as ``_await_post`` watches (the spin hint,
    # the yields): how many a second takes (``_loads_per_s``)
    total = 0
    for spins in range(1, loads + 1):
        cpu_relax()
        if spins % YIELD_EVERY == 0:
            syscall(ctl[SYSCALL], ctl[SCHED_YIELD], 0, 0, 0)
        total += atomic_load(ctl, BLOCK_LEN)
    return total


@_kernel
def _empty_entry(block: np.ndarray) -> None:  # pragma: no cover - runs compiled
    block[0] += 1  # the hand-off probe's part: nothing but a sign that it ran


IMPORT = (
    f"from dualflow.kernels.base.native_crew import post, wait_done  # {DIGEST}\n"
    "from dualflow.kernels.base.native_calls import address_of, as_voidptr"
)
"""The import lines of generated kernels that split over the crew (its digest in the comment)."""


def entry_address(dispatcher: Any) -> int:
    """The address of numba's C entry point of ``dispatcher``'s overload for one
    ``BLOCK_TYPE`` argument (compiled, or loaded from the kernels store, here).

    Example:
        >>> entry_address(_empty_entry) > 0
        True
    """
    return _c_entry(dispatcher, (BLOCK_TYPE,))


def _c_entry(dispatcher: Any, signature: tuple) -> int:
    dispatcher.compile(signature)
    result = dispatcher.overloads[signature]
    return result.library.get_pointer_to_function(result.fndesc.llvm_cfunc_wrapper_name)


class NativeCrew:
    """``count`` threads running ``_serve``, each with a row of control words in ``ctls``.

    Example:
        >>> crew = NativeCrew(1)
        >>> block = np.zeros(1, np.int64)
        >>> with crew.lock:
        ...     crew.run(entry_address(_empty_entry), block)
        >>> block.tolist()
        [1]
        >>> crew.close(); crew.closed
        True
    """

    def __init__(self, count: int, lock: threading.Lock | None = None) -> None:
        self.lock = lock or threading.Lock()  # held by the call using the threads
        self._models: dict[str, Any] = {}  # ``measured_once``'s values
        libc = ctypes.CDLL(None)
        libc.calloc.restype = ctypes.c_void_p
        memory = libc.calloc(count * WORDS, 8)  # never freed: a worker reads it until it stops
        if not memory:
            raise MemoryError("native_crew: no memory for the control words")
        self._words = (ctypes.c_int64 * (count * WORDS)).from_address(memory)  # int reads
        self.ctls = np.ctypeslib.as_array(self._words).reshape(count, WORDS)
        self.ctls[:, SYSCALL] = ctypes.cast(libc.syscall, ctypes.c_void_p).value
        self.ctls[:, FUTEX], self.ctls[:, GETTID], self.ctls[:, SCHED_YIELD] = SYSCALLS[
            platform.machine()
        ]
        self.ctls[:, LINGER] = max(1, round(LINGER_S * _loads_per_s(self.ctls[0])))
        self.spins = round(self.ctls[0, LINGER] * CALLER_WAIT_S / LINGER_S)  # wait_done's
        self.closed, self._libc, self._handles = False, libc, []
        self._sleeping = [k * WORDS + SLEEPING for k in range(count)]
        start = _c_entry(_serve, (types.voidptr,))
        for row in self.ctls:
            handle = ctypes.c_ulong()
            failed = libc.pthread_create(
                ctypes.byref(handle), None, ctypes.c_void_p(start), ctypes.c_void_p(row.ctypes.data)
            )
            if failed:
                self.close()
                raise OSError(failed, "native_crew: pthread_create failed")
            self._handles.append(handle)
        self.placements = [Placement(tid, count + 1) for tid in self._thread_ids()]

    def _thread_ids(self) -> list[int | None]:
        deadline = time.monotonic() + 1.0  # each thread stores its id first thing
        while (self.ctls[:, TID] == 0).any() and time.monotonic() < deadline:
            time.sleep(1e-4)
        return [int(tid) or None for tid in self.ctls[:, TID]]

    def run(self, entry: int, block: np.ndarray) -> None:
        """Run ``entry(block)`` on every worker (the same block) and wait for them all; call
        while holding ``lock``."""
        posted = [post(ctl, entry, block) for ctl in self.ctls]
        for ctl, number in zip(self.ctls, posted):
            wait_done(ctl, number, self.spins)

    def measured_once(self, key: str, measure: Callable[[], Any]) -> Any:
        """``measure()``'s value for ``key``, taken once per crew while holding its threads (a
        split's cost model: the least times of runs alone and split); None while another call
        holds them or the crew is closed (asked again later), and when ``measure`` gives None.

        Example:
            >>> crew = NativeCrew(1)
            >>> crew.measured_once("doc", lambda: 2.0), crew.measured_once("doc", lambda: 3.0)
            (2.0, 2.0)
            >>> crew.close()
        """
        found = self._models.get(key)
        if found is not None or not self.lock.acquire(False):
            return found
        try:
            if self.closed:
                return None
            value = measure()
            if value is not None:
                self._models[key] = value
            return value
        finally:
            self.lock.release()

    def awake(self) -> bool:
        """Whether every worker still watches for work (none asleep on its futex)."""
        words = self._words
        return not any(words[k] for k in self._sleeping)

    def nudge(self) -> None:
        """Wake every sleeping worker without work: it watches for another linger."""
        words = self._words
        for ctl, sleeping in zip(self.ctls, self._sleeping):
            if words[sleeping] and not self.closed:
                _futex(ctl, POSTED, FUTEX_WAKE, 1)

    def keep_off(self, cpu: int | None) -> None:
        """Keep the workers off the caller's CPU ``cpu`` (``placement``)."""
        for placement in self.placements:
            placement.keep_off(cpu)

    def close(self) -> None:
        """Stop every worker and join its thread (their control words stay allocated)."""
        with self.lock:  # after the call using the threads, if any: it sees ``closed``
            if self.closed:
                return
            self.closed = True
            for ctl in self.ctls[: len(self._handles)]:
                ctl[STOP] = 1
                wait_done(ctl, post(ctl, 0, ctl[:1]), self.spins)
            for handle in self._handles:
                self._libc.pthread_join(handle, None)


def _loads_per_s(ctl: np.ndarray, loads: int = 1 << 16) -> float:
    """How many watches of a control word one second of this CPU takes (fastest of three)."""
    _spin(ctl, 16)
    best = least_seconds(lambda: _spin(ctl, loads), 3)
    return loads / max(best, 1e-9)


_SUPPORTED = sys.platform == "linux" and platform.machine() in SYSCALLS
_lock = threading.Lock()
_failed = False  # the crew could not start once: not tried again (``_give_up``)


def crew() -> NativeCrew | None:
    """The process's crew for the owner's thread count (started at the first call), or None:
    one thread, another platform, or ``DUALFLOW_NATIVE_THREADS=0``.

    Example:
        >>> c = crew()
        >>> c is None or len(c.ctls) == owner().threads - 1
        True
    """
    work = owner()
    if not (_enabled and _SUPPORTED) or _failed or work.threads < 2:
        return None
    current = work.peek(SERVICE)
    if current is not None and len(current.ctls) == work.threads - 1 and not current.closed:
        return current
    try:
        with _lock:
            return work.service(SERVICE, lambda c: _keep_or_start(c, work.threads - 1))
    except (OSError, MemoryError, numba.core.errors.NumbaError) as exc:
        return _give_up(exc)


def nudge() -> None:
    """Wake the running crew's sleeping workers (``NativeCrew.nudge``); start none: after a GEMM
    longer than their linger, the splits after it find them awake.

    Example:
        >>> nudge()
    """
    current = owner().peek(SERVICE)
    if current is not None:
        current.nudge()


def _give_up(exc: BaseException) -> None:
    """No crew for the rest of the process, said once: the threads could not start (a thread
    limit, no memory, numba unable to build the loop). Kernels split over ``cpu_threads``."""
    global _failed
    _failed = True
    warnings.warn(
        f"dualflow: the native kernel threads could not start ({type(exc).__name__}: {exc}); "
        "fused kernels split over Python worker threads instead",
        RuntimeWarning,
        stacklevel=3,
    )


def _keep_or_start(current: NativeCrew | None, count: int) -> NativeCrew:
    if current is not None and len(current.ctls) == count and not current.closed:
        return current
    work = owner()
    work.quiet_blas()  # OpenBLAS's threads spin ~0.1 s after each GEMM: they would hold the
    # workers' CPUs for milliseconds (a split waited 2-3 ms). One lock with ``cpu_threads``' crew:
    # one call at a time uses the process's threads
    return NativeCrew(count, work.crew.lock)
