"""A step-by-step loop whose steps are split into parts that threads run in lockstep inside one
numba kernel: atomic counters, a part claim that never waits for a thread that is not there,
and the runner that starts the threads.

A recurrence's step is ~60 us of work that the next step depends on entirely, so handing parts
to threads per step from Python (~20-40 us a hand-off) costs more than it saves. Instead each
thread runs the whole loop in one ``nogil`` numba call. Before step ``s`` a thread waits until
every part of the steps before it is done, then walks the step's parts, starting from its own
(``first``: the same part every step, so its data stays in its core's cache), and runs each it
claims with an atomic increment. A thread the OS leaves waiting (or one that never starts:
``run_parts`` runs jobs one after another when its workers are busy) only means the others
claim its parts: nobody waits for a claim that nobody made. Which thread runs a part never
changes what it computes, so the results do not depend on the thread count.

``sync`` is one int64 array of zeros (``new_sync``): ``sync[0]`` counts the parts done,
``sync[1 + s * parts + k]`` the claims of step ``s``'s part ``k``.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable

import numba
import numpy as np

from dualflow.kernels.base.atomics import FINGERPRINT as ATOMICS_FINGERPRINT
from dualflow.kernels.base.atomics import atomic_add, atomic_load
from dualflow.kernels.base.cpu_threads import (
    blas_spinning,
    gemms_on_every_core,
    run_parts,
    threads,
)
from dualflow.kernels.base.numba_cache import code_fingerprint


@numba.njit(inline="always")
def wait_for_step(sync, step, parts):
    """Wait until every part of the steps before ``step`` is done (``parts`` parts a step).

    Example:
        >>> wait_for_step(np.array([4, 2, 2], np.int64), 2, 2)
    """
    while atomic_load(sync, 0) < parts * step:
        pass


@numba.njit(inline="always")
def claim_part(sync, step, parts, part):
    """Whether this thread claims part ``part`` of ``step`` (True for the first to ask only).

    Example:
        >>> sync = np.zeros(5, np.int64)
        >>> claim_part(sync, 1, 2, 0), claim_part(sync, 1, 2, 0), claim_part(sync, 1, 2, 1)
        (True, False, True)
    """
    return atomic_add(sync, 1 + step * parts + part, 1) == 0


@numba.njit(inline="always")
def part_done(sync):
    """Count one part done (after its writes: the update orders them before it).

    Example:
        >>> sync = np.zeros(2, np.int64)
        >>> part_done(sync)
        >>> int(sync[0])
        1
    """
    atomic_add(sync, 0, 1)


# the intrinsics' definitions (their code generators are nested in them) and the inlined
# protocol: kernels inlining them add this to their cache stem
FINGERPRINT = hashlib.sha256(
    ATOMICS_FINGERPRINT.encode()
    + b"".join(code_fingerprint(g.py_func.__code__) for g in (wait_for_step, claim_part, part_done))
).hexdigest()[:16]
"""A digest of the counters' code (intrinsics and protocol), for the stems of kernels that
inline them (a kernel's cache key hashes its own bytecode only)."""


def new_sync(steps: int, parts: int) -> np.ndarray:
    """The counters of a loop of ``steps`` steps of ``parts`` parts, all zero.

    Example:
        >>> new_sync(2, 2).tolist()
        [0, 0, 0, 0, 0]
    """
    return np.zeros(1 + steps * parts, np.int64)


def run_lockstep(parts: int, loop: Callable[[int], None]) -> None:
    """``loop(first)`` (one thread's whole run of a lockstep kernel, starting each step at part
    ``first``) on ``min(parts, threads())`` threads at once where GEMMs may run on every core
    (``cpu_threads.gemms_on_every_core``: each of its GEMMs then on one BLAS thread); else
    once, on this thread, its GEMMs on OpenBLAS's threads, kept awake between steps
    (``blas_spinning``). Which threads run the parts never changes the results; OpenBLAS's count
    does (its GEMMs round by it), as with ``cpu_threads.run_pulled_gemms``.

    Example:
        >>> firsts = []
        >>> run_lockstep(2, firsts.append)
        >>> firsts[0]
        0
    """
    with gemms_on_every_core() as concurrent:
        if concurrent:
            run_parts([functools.partial(loop, first) for first in range(min(parts, threads()))])
            return
    with blas_spinning():
        loop(0)
