"""The NCCL communicator: cupy's NCCL bindings for GPU arrays, bootstrapped over MPI.

Rank 0 creates the NCCL unique id and broadcasts it with MPI; objects, gathers and barriers go
over MPI too. Needs cupy and a CUDA GPU (``pip install 'dualflow[cuda12]'``).
"""

from __future__ import annotations

from typing import Any

from dualflow.distributed.mpi import MpiCommunicator
from dualflow.errors import CommunicatorError

NEEDS_CUPY = "nccl needs cupy and a CUDA GPU: pip install 'dualflow[cuda12]'"
NEEDS_LIBNCCL = (
    "nccl: cupy cannot load the NCCL library (libnccl.so.2): pip install nvidia-nccl-cu12"
)
_NCCL_DTYPES = ("float16", "float32", "float64", "int32", "int64", "uint8", "int8")


def import_nccl() -> tuple[Any, Any]:
    """``(cupy, cupy.cuda.nccl)``, or the CommunicatorError saying what to install.

    Example:
        >>> NEEDS_CUPY.split(":")[0]  # what the error says when either is missing
        'nccl needs cupy and a CUDA GPU'
    """
    try:
        import cupy  # noqa: PLC0415 - optional dependency
        from cupy.cuda import nccl  # noqa: PLC0415

        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no CUDA device")
    except Exception:  # ImportError, CUDA driver errors: all mean "no GPU here"
        raise CommunicatorError(NEEDS_CUPY) from None
    # cupy imports its nccl module even when libnccl is missing, as a stub without the API
    if not getattr(nccl, "available", True) or not hasattr(nccl, "NcclCommunicator"):
        raise CommunicatorError(NEEDS_LIBNCCL)
    return cupy, nccl


class NcclCommunicator(MpiCommunicator):
    """MPI for objects and set-up, NCCL for GPU array all-reduce and broadcast.

    Each rank uses GPU ``rank % device_count`` unless ``device`` is given.

    Example:
        >>> NcclCommunicator.name
        'nccl'
    """

    name = "nccl"

    def __init__(
        self, mpi_comm: Any = None, device: int | None = None, timeout: float | None = None
    ) -> None:
        self.cupy, self.nccl = import_nccl()
        super().__init__(mpi_comm, timeout)
        count = self.cupy.cuda.runtime.getDeviceCount()
        self.device = self.cupy.cuda.Device(self.rank % count if device is None else device)
        self.device.use()
        uid = self.nccl.get_unique_id() if self.rank == 0 else None
        uid = self.mpi_comm.bcast(uid, root=0)
        self.nccl_comm = self.nccl.NcclCommunicator(self.size, uid, self.rank)

    def _array_problem(self, array: Any) -> str:
        """GPU arrays also need a dtype NCCL has: checked with the others before anything moves
        (the shared check of ``Communicator._begin``; a dtype found missing only inside the
        NCCL call would fail this rank alone and leave the others waiting in theirs)."""
        problem = super()._array_problem(array)
        gpu = hasattr(array, "__cuda_array_interface__")
        if not problem and gpu and array.dtype.name not in _NCCL_DTYPES:
            problem = f"nccl: no NCCL type for dtype {array.dtype.name}; cast first"
        return problem

    def _nccl_dtype(self, array: Any) -> int:
        name = array.dtype.name
        if name not in _NCCL_DTYPES:
            raise CommunicatorError(f"nccl: no NCCL type for dtype {name}; cast first")
        return getattr(self.nccl, f"NCCL_{name.upper()}")

    def _allreduce_sum(self, array: Any) -> Any:
        if not hasattr(array, "__cuda_array_interface__"):
            return super()._allreduce_sum(array)  # host arrays: plain MPI
        out = self.cupy.empty_like(array)
        stream = self.cupy.cuda.get_current_stream()
        self.nccl_comm.allReduce(
            array.data.ptr,
            out.data.ptr,
            array.size,
            self._nccl_dtype(array),
            self.nccl.NCCL_SUM,
            stream.ptr,
        )
        return out

    def _bcast_array(self, array: Any, root: int) -> None:
        if not hasattr(array, "__cuda_array_interface__"):
            super()._bcast_array(array, root)
            return
        stream = self.cupy.cuda.get_current_stream()
        flat = array.reshape(-1).view(self.cupy.uint8)
        self.nccl_comm.bcast(flat.data.ptr, flat.size, self.nccl.NCCL_UINT8, root, stream.ptr)
