"""``create_communicator(name)``: the one entry point that picks and sets up a communicator.

``mpi`` also installs the abort-on-exception hook, so one failing rank ends the whole job.
"""

from __future__ import annotations

from typing import Any

from dualflow.distributed.communicator import Communicator
from dualflow.distributed.loopback import LoopbackCommunicator, LoopbackHub

NAMES = ("mpi", "nccl", "loopback")


def create_communicator(
    name: str = "mpi",
    *,
    hub: LoopbackHub | None = None,
    rank: int = 0,
    mpi_comm: Any = None,
    abort_on_exception: bool = True,
    timeout: float | None = None,
) -> Communicator:
    """A communicator: ``"mpi"`` (CPU, default), ``"nccl"`` (GPU) or ``"loopback"`` (tests).

    Args:
        name: which implementation.
        hub: loopback only: the group to join as ``rank``; None makes a 1-rank group.
        rank: loopback only: this communicator's rank in ``hub``.
        mpi_comm: mpi/nccl only: an mpi4py communicator (default ``MPI.COMM_WORLD``).
        abort_on_exception: mpi/nccl: install the hook that aborts every rank when one raises.
        timeout: seconds a collective may wait for the other ranks before the job is aborted
            (loopback: raises ``CollectiveTimeout``); default ``DUALFLOW_COLLECTIVE_TIMEOUT``
            or 300. ``comm.timeout`` can be changed later.

    Raises:
        CommunicatorError: mpi4py, or for nccl cupy and a GPU, are missing.
        ConfigError: ``timeout`` (or ``DUALFLOW_COLLECTIVE_TIMEOUT``) is not a finite
            number of seconds > 0.

    Example:
        >>> comm = create_communicator("loopback")
        >>> comm.size, comm.name
        (1, 'loopback')
    """
    if name == "loopback":
        return LoopbackCommunicator(hub or LoopbackHub(1), rank, timeout)
    if name not in ("mpi", "nccl"):
        raise ValueError(f"unknown communicator {name!r}; choose one of {NAMES}")
    from dualflow.distributed import mpi  # noqa: PLC0415 - mpi4py is imported only when used

    if name == "nccl":
        from dualflow.distributed.nccl import NcclCommunicator, import_nccl  # noqa: PLC0415

        import_nccl()  # fail with the install hint before touching MPI
        comm: Communicator = NcclCommunicator(mpi_comm, timeout=timeout)
    else:
        comm = mpi.MpiCommunicator(mpi_comm, timeout)
    if abort_on_exception:
        mpi.install_abort_hook(comm.mpi_comm)
    return comm
