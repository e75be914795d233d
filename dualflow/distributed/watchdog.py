"""The collective watchdog: a collective that does not complete in time aborts the whole job.

A blocking MPI call cannot be interrupted from Python, so one daemon thread per process watches
the communicators' armed collectives. One that has waited longer than its communicator's
``timeout`` (``DUALFLOW_COLLECTIVE_TIMEOUT``, default 300 s) is reported — which collective, its
sequence number, and which ranks have not arrived — and the job is aborted. Ranks on one node
publish where they are on a shared-memory board (``Board``): that is how a waiting rank knows who
has not arrived.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import weakref
from typing import Any

import numpy as np

DEFAULT_TIMEOUT = 300.0
_TEXT_BYTES = 232


def default_timeout() -> float:
    """``DUALFLOW_COLLECTIVE_TIMEOUT`` in seconds (default 300): a communicator's initial timeout.

    Raises:
        ValueError: the variable is set but not a positive number.

    Example:
        >>> default_timeout() > 0
        True
    """
    text = os.environ.get("DUALFLOW_COLLECTIVE_TIMEOUT", "").strip()
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(
            f"DUALFLOW_COLLECTIVE_TIMEOUT must be a positive number of seconds: {text}"
        )
    return value


class Board:
    """Where every rank of a communicator is, in memory shared by the ranks of one node.

    Each rank writes its own slot (sequence number, whether it is inside that collective, since
    when, and its description); only a timed-out rank reads the others'. ``slots`` is None when
    the ranks span several nodes (MPI cannot tell then who has not arrived).
    """

    DTYPE = np.dtype([("seq", "i8"), ("busy", "i8"), ("since", "f8"), ("text", f"S{_TEXT_BYTES}")])

    def __init__(self, mpi: Any, mpi_comm: Any) -> None:
        self.slots: np.ndarray | None = None
        node = mpi_comm.Split_type(mpi.COMM_TYPE_SHARED)
        size = mpi_comm.Get_size()
        if node.Get_size() == size:
            nbytes = self.DTYPE.itemsize * size if node.Get_rank() == 0 else 0
            self.window = mpi.Win.Allocate_shared(nbytes, self.DTYPE.itemsize, comm=node)
            buffer, _ = self.window.Shared_query(0)
            self.slots = np.ndarray((size,), self.DTYPE, buffer=buffer)
            if node.Get_rank() == 0:
                self.slots[...] = np.zeros((), self.DTYPE)
            node.Barrier()  # nobody reads or writes before the board is cleared
        node.Free()

    def enter(self, rank: int, position: Any) -> None:
        if self.slots is not None:
            text = position.describe().encode("utf-8", "replace")[:_TEXT_BYTES]
            self.slots[rank] = (position.seq, 1, time.monotonic(), text)

    def leave(self, rank: int) -> None:
        if self.slots is not None:
            slot = self.slots[rank : rank + 1]
            slot["busy"], slot["since"] = 0, time.monotonic()

    def missing(self, rank: int, seq: int) -> str:
        """Which ranks have not arrived at collective ``seq``, and where each of them is."""
        if self.slots is None:
            return "the ranks span several nodes, so which ones have not arrived is unknown"
        now, late = time.monotonic(), []
        for other, slot in enumerate(self.slots.copy()):
            if other == rank or int(slot["seq"]) >= seq:
                continue
            text = slot["text"].decode("utf-8", "replace") or "none yet"
            state = "waiting in" if slot["busy"] else "last finished"
            ago = now - float(slot["since"]) if slot["since"] else 0.0
            late.append(f"rank {other} ({state} {text}, {ago:.1f} s ago)")
        if not late:
            return "every rank has arrived (the transfer itself is stuck)"
        return "not arrived: " + "; ".join(late)


class Watchdog:
    """The process's watchdog thread over every registered communicator's armed collective."""

    def __init__(self) -> None:
        self.comms: weakref.WeakSet = weakref.WeakSet()
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def watch(self, comm: Any) -> None:
        """Watch ``comm`` (it has ``_armed``, ``timeout``, ``abort(message)``); start the thread."""
        with self.lock:
            self.comms.add(comm)
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name="dualflow-watchdog")
                self.thread.daemon = True
                self.thread.start()

    def _loop(self) -> None:
        while True:
            comms = list(self.comms)
            shortest = min((c.timeout for c in comms), default=DEFAULT_TIMEOUT)
            time.sleep(min(1.0, max(0.02, shortest / 20)))
            now = time.monotonic()
            for comm in comms:
                armed = comm._armed
                if armed is not None and now - armed[0] > comm.timeout:
                    comm.abort(timeout_message(comm, armed[1]))


def timeout_message(comm: Any, position: Any) -> str:
    """What a timed-out rank prints before aborting the job."""
    return (
        f"[dualflow rank {comm.rank}] collective {position.describe()} on the {comm.name} "
        f"communicator did not complete within {comm.timeout:g} s (comm.timeout, default "
        f"DUALFLOW_COLLECTIVE_TIMEOUT); {comm.board.missing(comm.rank, position.seq)}. "
        "Aborting the job.\n"
    )


WATCHDOG = Watchdog()


def write_stderr(text: str) -> None:
    """Write and flush (the process may be aborted right after)."""
    sys.stdout.flush()
    sys.stderr.write(text)
    sys.stderr.flush()
