"""The collective watchdog: a collective that does not complete in time aborts the whole job.

A blocking MPI call cannot be interrupted from Python, so one daemon thread per process watches
the communicators' armed collectives. One that has waited longer than its communicator's
``timeout`` (``DUALFLOW_COLLECTIVE_TIMEOUT``, default 300 s) is reported — which collective, its
sequence number, and which ranks have not arrived — and the job is aborted. Ranks on one node
publish where they are on a shared-memory board (``Board``): that is how a waiting rank knows who
has not arrived.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from dualflow import arguments
from dualflow.errors import ArgumentError, ConfigError, user_frame, with_location

DEFAULT_TIMEOUT = 300.0
TIMEOUT_RANGE = "must be a finite number of seconds > 0"
ENV = "DUALFLOW_COLLECTIVE_TIMEOUT"
_TEXT_BYTES = 232


def default_timeout() -> float:
    """``DUALFLOW_COLLECTIVE_TIMEOUT`` in seconds (default 300): a communicator's initial timeout.

    Raises:
        ConfigError: the variable is set but not a finite number > 0 (``inf`` and ``nan``
            would switch the watchdog off).

    Example:
        >>> default_timeout() > 0
        True
    """
    text = os.environ.get(ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{ENV}={text!r} {TIMEOUT_RANGE}")
    return value


def checked_timeout(owner: str, timeout: Any) -> float:
    """A collective timeout in seconds: ``default_timeout()`` for None, else a finite number
    > 0 (``ConfigError`` naming ``owner``'s ``timeout``, the value and the range otherwise).

    Example:
        >>> checked_timeout("LoopbackHub", 2)
        2.0
        >>> try:
        ...     checked_timeout("MpiCommunicator", "5")
        ... except ConfigError as exc:
        ...     print(str(exc).split(" must ")[0])
        MpiCommunicator.timeout='5'
    """
    if timeout is None:
        return default_timeout()
    try:
        return arguments.real(owner, "timeout", timeout, 0.0, open_low=True)
    except ArgumentError:
        message = f"{owner}.timeout={timeout!r} {TIMEOUT_RANGE}"
        raise ConfigError(with_location(message, user_frame())) from None


def constructor_timeout(owner: str, timeout: Any) -> Any:
    """A constructor's ``timeout`` argument checked as every constructor argument is
    (``ArgumentError`` naming the class, the argument, the value and the caller's line);
    attribute assignments and the environment variable raise ``ConfigError`` instead.

    Example:
        >>> constructor_timeout("LoopbackHub", None) is None, constructor_timeout("Hub", 3)
        (True, 3.0)
    """
    return (
        None if timeout is None else arguments.real(owner, "timeout", timeout, 0.0, open_low=True)
    )


class Timeout:
    """The ``timeout`` attribute of communicators and hubs: validated wherever it is set, so
    a bad value raises at the assignment instead of killing the watchdog later."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = f"_{name}"

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        return self if obj is None else getattr(obj, self.slot)

    def __set__(self, obj: Any, value: Any) -> None:
        setattr(obj, self.slot, checked_timeout(type(obj).__name__, value))


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
    """The process's watchdog thread over every registered communicator's armed collective.

    If the thread itself fails, it prints why and aborts the job (through the communicators,
    then ``exit(1)``): a job without its watchdog would hang silently instead.
    """

    def __init__(self, exit: Callable[[int], Any] = os._exit) -> None:
        self.comms: weakref.WeakSet = weakref.WeakSet()
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()
        self.exit = exit

    def watch(self, comm: Any) -> None:
        """Watch ``comm`` (it has ``_armed``, ``timeout``, ``abort(message)``); start the thread."""
        with self.lock:
            self.comms.add(comm)
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name="dualflow-watchdog")
                self.thread.daemon = True
                self.thread.start()

    def _loop(self) -> None:
        try:
            while True:
                self._check_once()
        except BaseException as exc:  # whatever it is, the job must end loudly
            self._fail(exc)

    def _check_once(self) -> None:
        with self.lock:  # a WeakSet changed by watch() while listed would raise
            comms = list(self.comms)
        shortest = min((c.timeout for c in comms), default=DEFAULT_TIMEOUT)
        time.sleep(min(1.0, max(0.02, shortest / 20)))
        now = time.monotonic()
        for comm in comms:
            armed = comm._armed
            if armed is not None and now - armed[0] > comm.timeout:
                comm.abort(timeout_message(comm, armed[1]))

    def _fail(self, exc: BaseException) -> None:
        """The watchdog thread failed: print why and end the job (never a silent death)."""
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        message = (
            f"[dualflow] the collective watchdog failed ({type(exc).__name__}: {exc}); without "
            f"it a stuck collective would wait forever, so the job is aborted.\n{text}"
        )
        with self.lock:
            comms = list(self.comms)
        for comm in comms:
            try:
                comm.abort(message)  # MPI: prints it and ends every rank
            except BaseException:  # try the next one; exit() below in any case
                continue
        write_stderr(message)
        self.exit(1)


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
