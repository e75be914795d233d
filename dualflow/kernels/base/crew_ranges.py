"""One call's range ``[0, block[HI])`` split over the native crew (``native_crew``) and its
caller: consecutive shares, each handed to a worker as a copy of the call's block with its own
``LO``/``HI`` words, the first share run by the caller, then a wait for every worker, all in one
``nogil`` call (``run_split``). ``run`` does that holding the crew, or tells its caller to run
alone.

Each share is one part's alone and an entry point writes only its own share, so the results
never depend on the split, the crew or timing. A batch of matrix products
(``linalg.batched_native``) and Adam's update (``optim.adam``) split this way.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
from numba import types

from dualflow.background.placement import current_cpu
from dualflow.background.workers import IN_WORKER
from dualflow.kernels.base import native_crew, numba_cache
from dualflow.kernels.base.native_calls import BLOCK_TYPE, call_entry
from dualflow.kernels.base.native_crew import NativeCrew, post, wait_done

LO, HI = 0, 1
"""The words of a block holding its share: ``[block[LO], block[HI])``."""
DIGEST = hashlib.sha256(Path(__file__).read_bytes() + native_crew.DIGEST.encode()).hexdigest()[:16]


def _kernel(py_func: Any) -> Any:
    # compiled as the fixed kernels are, machine code in the signed kernels store
    return numba_cache.cached_njit(py_func, f"k_crewranges{py_func.__name__}_{DIGEST}")


@_kernel
def run_split(ctls: np.ndarray, entry_at: int, spins: int, block: np.ndarray) -> None:
    """The whole range ``block[HI]`` long: consecutive shares posted to the workers of ``ctls``,
    the first share run here, then a wait for every worker (one nogil call)."""
    count, parts = block[HI], ctls.shape[0] + 1  # pragma: no cover - runs compiled
    blocks = np.empty((parts, block.shape[0]), np.int64)
    for w in range(parts):
        blocks[w, :] = block
        blocks[w, LO], blocks[w, HI] = count * w // parts, count * (w + 1) // parts
    posted = np.empty(parts - 1, np.int64)
    for w in range(parts - 1):
        posted[w] = post(ctls[w], entry_at, blocks[w + 1])
    call_entry(entry_at, blocks[0])
    for w in range(parts - 1):
        wait_done(ctls[w], posted[w], spins)


_ENTRIES: dict[Any, int] = {}


def entry_at(dispatcher: Any) -> int:
    """The address of ``dispatcher``'s crew entry point (``native_crew.entry_address``), looked
    up once a process: a lookup costs more than a small call.

    Example:
        >>> from dualflow.kernels.base.native_crew import _empty_entry, entry_address
        >>> entry_at(_empty_entry) == entry_address(_empty_entry) == entry_at(_empty_entry)
        True
    """
    found = _ENTRIES.get(dispatcher)
    if found is None:
        found = _ENTRIES[dispatcher] = native_crew.entry_address(dispatcher)
    return found


def run_held(crew: NativeCrew, entry_at: int, block: np.ndarray) -> None:
    """``run_split`` over ``crew``, its caller holding the crew's lock."""
    crew.keep_off(current_cpu())  # the OS would pile the workers onto this CPU
    run_split(crew.ctls, entry_at, crew.spins, block)


def run(crew: NativeCrew, entry_at: int, block: np.ndarray) -> bool:
    """``run_held`` where this thread gets the crew; False (nothing ran) inside another call's
    part, while another call holds the crew, or once it is closed: the caller runs alone.

    Example:
        >>> from dualflow.kernels.base.native_crew import _empty_entry, entry_address
        >>> crew, block = NativeCrew(1), np.array([0, 4, 0], np.int64)
        >>> run(crew, entry_address(_empty_entry), block)
        True
        >>> crew.close()
    """
    if IN_WORKER.active or not crew.lock.acquire(False):
        return False
    try:
        if crew.closed:
            return False
        run_held(crew, entry_at, block)
        return True
    finally:
        crew.lock.release()


def warm() -> None:
    """Compile (so store) ``run_split`` for its one signature.

    Example:
        >>> warm(); len(run_split.signatures)
        1
    """
    ctls = types.Array(types.int64, 2, "C")
    run_split.compile((ctls, types.int64, types.int64, BLOCK_TYPE))
