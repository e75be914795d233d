"""The MPI communicator (mpi4py), the abort-on-exception hook and the check at interpreter exit.

Arrays travel as buffers (``Allreduce``/``Bcast``); objects are pickled. Dtypes MPI has no
reduction for (float16) are all-gathered as bytes and summed here in rank order, which keeps
the half-size transfer and gives every rank the same result.
"""

from __future__ import annotations

import atexit
import sys
import time
import traceback
import weakref
from typing import Any

import numpy as np

from dualflow.distributed.agreement import EXIT_TEXT, KIND_EXIT, OK
from dualflow.distributed.communicator import Communicator
from dualflow.distributed.watchdog import WATCHDOG, Board, checked_timeout, write_stderr
from dualflow.errors import CommunicatorError

_MPI_SUM_DTYPES = {"float32", "float64", "int32", "int64", "uint8", "int8", "uint32", "uint64"}


def import_mpi() -> Any:
    """mpi4py's ``MPI`` module, or a CommunicatorError saying how to install it.

    Example:
        >>> import_mpi().COMM_WORLD.Get_size() >= 1
        True
    """
    try:
        from mpi4py import MPI  # noqa: PLC0415 - optional dependency, imported on use
    except ImportError as exc:
        raise CommunicatorError(
            f"the mpi communicator needs mpi4py and an MPI library ({exc}): "
            "pip install 'dualflow[mpi]'"
        ) from None
    return MPI


class MpiCommunicator(Communicator):
    """This process's rank of ``MPI.COMM_WORLD`` (or of ``mpi_comm`` when given).

    It works on its own duplicate of that communicator, so collectives of other communicators
    (or the user's own mpi4py calls) never pair with its own.

    Example:
        >>> comm = MpiCommunicator()
        >>> comm.allgather(comm.rank) == list(range(comm.size))
        True
    """

    name = "mpi"

    def __init__(self, mpi_comm: Any = None, timeout: float | None = None) -> None:
        checked_timeout(type(self).__name__, timeout)  # before a communicator is duplicated
        self.MPI = import_mpi()
        self.mpi_comm = (self.MPI.COMM_WORLD if mpi_comm is None else mpi_comm).Dup()
        self.board = Board(self.MPI, self.mpi_comm)
        super().__init__(self.mpi_comm.Get_rank(), self.mpi_comm.Get_size(), timeout)
        WATCHDOG.watch(self)
        _EXITING.add(self)

    def _post_allreduce(self, array: Any) -> tuple[Any, Any]:
        if not (isinstance(array, np.ndarray) and array.dtype.name in _MPI_SUM_DTYPES):
            return None, self._allreduce_sum(array)
        out = np.empty_like(array)
        # Non-blocking even when the caller waits at once: MPI never pairs a blocking
        # collective with a non-blocking one, and a compiled plan's starts are non-blocking.
        return self.mpi_comm.Iallreduce(array, out, op=self.MPI.SUM), out

    def _allreduce_sum(self, array: Any) -> Any:
        if array.dtype.name not in _MPI_SUM_DTYPES:
            return self._allreduce_by_gather(array)
        out = np.empty_like(array)
        self.mpi_comm.Iallreduce(array, out, op=self.MPI.SUM).Wait()
        return out

    def _allreduce_sum_into(self, array: Any, out: Any) -> bool:
        direct = (
            isinstance(out, np.ndarray)
            and out.flags.c_contiguous
            and out.shape == array.shape
            and out.dtype == array.dtype
            and array.dtype.name in _MPI_SUM_DTYPES
        )
        if not direct:
            return False
        if out is array or (out.ctypes.data == array.ctypes.data and out.strides == array.strides):
            self.mpi_comm.Iallreduce(self.MPI.IN_PLACE, out, op=self.MPI.SUM).Wait()
        elif np.may_share_memory(array, out):
            return False  # a partial overlap: MPI may not read and write it at once
        else:
            self.mpi_comm.Iallreduce(array, out, op=self.MPI.SUM).Wait()
        return True

    def _allreduce_by_gather(self, array: Any) -> Any:
        gathered = np.empty((self.size, *array.shape), array.dtype)
        self.mpi_comm.Allgather(array.view(np.uint8), gathered.view(np.uint8))
        total = gathered[0].copy()
        for part in gathered[1:]:  # rank order: the same sum on every rank
            total += part
        return total

    def _exchange_max(self, vector: np.ndarray) -> np.ndarray:
        out = np.empty_like(vector)
        self.mpi_comm.Allreduce(vector, out, op=self.MPI.MAX)
        return out

    def _bcast_obj(self, obj: Any, root: int) -> Any:
        return self.mpi_comm.bcast(obj, root=root)

    def _bcast_array(self, array: Any, root: int) -> None:
        self.mpi_comm.Bcast(array.reshape(-1).view(np.uint8), root=root)

    def _allgather_raw(self, obj: Any) -> list[Any]:
        return self.mpi_comm.allgather(obj)

    def _gather_raw(self, obj: Any, root: int) -> list[Any] | None:
        return self.mpi_comm.gather(obj, root=root)

    def _scatter_raw(self, objs: list[Any] | None, root: int) -> Any:
        return self.mpi_comm.scatter(objs, root=root)

    def _barrier_raw(self) -> None:
        self.mpi_comm.Barrier()

    def _arm(self, position: Any) -> Any:
        self.board.enter(self.rank, position)
        # the exit check too: a rank stuck in Python while the others exit ends the job
        self._armed = (time.monotonic(), position)
        return position

    def _disarm(self, token: Any) -> None:
        self._armed = None
        self.board.leave(self.rank)

    def abort(self, message: str) -> None:
        """Print ``message`` and abort every rank of the job (``MPI_Abort``)."""
        write_stderr(message)
        self.MPI.COMM_WORLD.Abort(1)


_EXITING: weakref.WeakSet = weakref.WeakSet()
EXIT_GRACE = 2.0  # seconds the exiting rank waits so the others can print their error first


def check_at_exit() -> None:
    """At interpreter exit, agree with the other ranks that they are exiting too.

    A rank that exits (``sys.exit()``, the end of its script) while others wait in a collective
    pairs this check with theirs: every rank then gets the divergence error, and this rank
    aborts the job instead of leaving the others waiting forever. Ranks that all exit after
    different numbers of multi-node optimizer steps (one skipped its last ``step()``) disagree
    too. It waits at most ``comm.timeout`` for the others (then the watchdog ends the job,
    naming the ranks that did not arrive). Registered with ``atexit``.
    """
    for comm in sorted(_EXITING, key=lambda c: c.comm_id):
        if comm.size == 1 or comm.MPI.Is_finalized():  # the script finalized MPI itself
            continue
        steps = comm.optimizer_steps
        state = f"after {steps} optimizer steps" if steps else ""
        try:
            comm.ledger.check(KIND_EXIT, EXIT_TEXT, "", OK, "", state)
        except CommunicatorError as exc:
            write_stderr(f"[dualflow rank {comm.rank}] CommunicatorError: {exc}\n")
            time.sleep(EXIT_GRACE)
            comm.MPI.COMM_WORLD.Abort(1)


atexit.register(check_at_exit)  # after mpi4py's own MPI_Finalize hook, so it runs before it


def install_abort_hook(mpi_comm: Any) -> None:
    """Make an uncaught exception print its rank and traceback, then abort every rank.

    Without it the failed rank exits while the others wait in their next collective forever.
    Installing twice is harmless.

    Example:
        >>> saved = sys.excepthook
        >>> install_abort_hook(import_mpi().COMM_WORLD); sys.excepthook.__name__
        'abort_on_exception'
        >>> sys.excepthook = saved
    """
    previous = sys.excepthook
    if getattr(previous, "__name__", "") == "abort_on_exception":
        return

    def abort_on_exception(kind: type, value: BaseException, tb: Any) -> None:
        rank = mpi_comm.Get_rank()
        text = "".join(traceback.format_exception(kind, value, tb))
        sys.stderr.write(f"[dualflow rank {rank}] uncaught exception, aborting the job:\n{text}")
        sys.stderr.flush()
        sys.stdout.flush()
        mpi_comm.Abort(1)

    sys.excepthook = abort_on_exception
