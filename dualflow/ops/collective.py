"""Collective ops: ``allreduce`` and its split form ``allreduce_start``/``allreduce_wait``.

IR attrs are plain data, so the ops name their communicator by an integer id (``COMMUNICATORS``);
a start's output, a 0-d int64 key into a per-communicator table of pending requests, is the
handle its wait consumes, so the overlap is ordinary data flow in the graph.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

import numpy as np

from dualflow.errors import CommunicatorError, DTypeError
from dualflow.ops.dispatch import apply
from dualflow.ops.registry import Meta, primitive

REDUCTIONS = ("sum", "mean")
COMMUNICATORS: dict[int, Any] = {}
_ids = itertools.count(1)
_lock = threading.Lock()  # loopback ranks register from several threads at once


def register_communicator(comm: Any) -> int:
    """Give ``comm`` a process-unique integer id the ``allreduce`` op can carry as an attr.

    ``comm`` needs ``allreduce_array(array, reduction) -> new array``.

    Example:
        >>> class Solo:
        ...     def allreduce_array(self, array, reduction):
        ...         return array.copy()
        >>> lookup_communicator(register_communicator(Solo())).__class__.__name__
        'Solo'
    """
    with _lock:
        comm_id = next(_ids)
        COMMUNICATORS[comm_id] = comm
    return comm_id


def lookup_communicator(comm_id: int) -> Any:
    """The communicator registered under ``comm_id``, or a CommunicatorError saying why not.

    Example:
        >>> try:
        ...     lookup_communicator(-1)
        ... except CommunicatorError as exc:
        ...     print(str(exc)[:45])
        allreduce: no communicator with id -1 in this
    """
    comm = COMMUNICATORS.get(comm_id)
    if comm is None:
        raise CommunicatorError(
            f"allreduce: no communicator with id {comm_id} in this process (closed, or the graph "
            "was traced in another process); create one with dualflow.distributed."
            "create_communicator() and retrace"
        )
    return comm


def _check(x: Meta, comm: int, reduction: str) -> None:
    if reduction not in REDUCTIONS:
        raise ValueError(f"allreduce: reduction must be one of {REDUCTIONS}, got {reduction!r}")
    if isinstance(x.dtype, type):
        raise DTypeError("allreduce: the input must be an array or tensor, not a Python scalar")
    if reduction == "mean" and np.dtype(x.dtype).kind != "f":
        raise DTypeError(f"allreduce: reduction 'mean' needs a float input, got {x.dtype}")
    lookup_communicator(comm)


@primitive("allreduce", impure=True, collective=True)
class AllReduce:
    """Sum (or mean) of ``x`` over every rank of communicator ``comm``; every rank gets it."""

    def infer(x: Meta, *, comm: int, reduction: str) -> tuple[Meta]:
        _check(x, comm, reduction)
        return (Meta(tuple(x.shape), x.dtype),)

    def forward(xp, x, *, comm, reduction):
        return lookup_communicator(comm).allreduce_array(xp.ascontiguousarray(x), reduction)

    def backward(ctx, gy):
        # y = reduce_k x_k on every rank and the loss sums every rank's part, so
        # dL/dx_r = reduce_k gy_k: the same collective on the gradients.
        return (apply(AllReduce, gy, **ctx.attrs),)


def allreduce(x: Any, comm: Any, reduction: str = "sum") -> Any:
    """Reduce ``x`` over the ranks of ``comm`` (a Communicator or its integer id).

    Every rank must call it in the same order with the same shape and dtype. Differentiable:
    the gradient of a sum (mean) all-reduce is the sum (mean) all-reduce of the gradients.

    Example:
        >>> from dualflow import ops
        >>> from dualflow.distributed import create_communicator
        >>> comm = create_communicator("loopback")  # one rank: the identity
        >>> ops.allreduce([1.0, 2.0], comm).tolist()
        [1.0, 2.0]
    """
    comm_id = comm if isinstance(comm, int) else comm.comm_id
    return apply(AllReduce, x, comm=int(comm_id), reduction=reduction)


# ----- split all-reduce: a non-blocking start and its wait (scheduled by bucket_allreduce) -----
# MPI has a native sum for these; other dtypes (float16) take the communicator's blocking path.
_NONBLOCKING_DTYPES = frozenset({"float32", "float64", "int32", "int64", "int8", "uint8"})
# comm id -> request key -> pending request; keys are per communicator, so loopback ranks (one
# communicator per thread) never share a table.
_PENDING: dict[int, dict[int, _Pending]] = {}
_KEYS: dict[int, itertools.count] = {}


class _Pending:
    """One started all-reduce: the MPI request (None once done) and the buffers it uses."""

    __slots__ = ("reduction", "request", "result", "size", "source")

    def __init__(self, request: Any, result: Any, source: Any, size: int, reduction: str):
        # ``source`` keeps the array MPI reads alive until the wait, whatever the graph frees.
        self.request, self.result, self.source = request, result, source
        self.size, self.reduction = size, reduction


def _post(comm: Any, array: Any, reduction: str) -> _Pending:
    mpi_comm = getattr(comm, "mpi_comm", None)
    if (
        mpi_comm is not None
        and isinstance(array, np.ndarray)
        and array.dtype.name in _NONBLOCKING_DTYPES
    ):
        out = np.empty_like(array)
        # comm.MPI is the mpi4py module the communicator already imported: no import here.
        request = mpi_comm.Iallreduce(array, out, op=comm.MPI.SUM)
        return _Pending(request, out, array, comm.size, reduction)
    # Loopback, NCCL, float16: the blocking collective now, so the wait only hands it over.
    result = comm.allreduce_array(array, reduction)
    if result is array or getattr(result, "base", None) is not None:
        result = result.copy()  # the memory planner counts on a wait's output owning its memory
    return _Pending(None, result, None, comm.size, reduction)


@primitive("allreduce_start", impure=True, collective=True)
class AllReduceStart:
    """Start a non-blocking all-reduce of ``x``; the output is the request's 0-d int64 key."""

    def infer(x: Meta, *, comm: int, reduction: str) -> tuple[Meta]:
        _check(x, comm, reduction)
        return (Meta((), np.dtype(np.int64)),)

    def forward(xp, x, *, comm, reduction):
        pending = _post(lookup_communicator(comm), xp.ascontiguousarray(x), reduction)
        key = next(_KEYS.setdefault(comm, itertools.count()))
        _PENDING.setdefault(comm, {})[key] = pending
        # the key stays on the host even on a GPU: the wait reads it with int(), which on a
        # device array would synchronize the stream in the middle of the step
        return np.asarray(key, dtype=np.int64)


@primitive("allreduce_wait", impure=True, collective=True)
class AllReduceWait:
    """Finish the all-reduce started as ``handle``; ``x`` (its input) gives the result's type."""

    def infer(handle: Meta, x: Meta, *, comm: int) -> tuple[Meta]:
        if tuple(handle.shape) != () or np.dtype(handle.dtype) != np.int64:
            raise DTypeError("allreduce_wait: the handle must be allreduce_start's int64[] output")
        lookup_communicator(comm)
        return (Meta(tuple(x.shape), x.dtype),)

    def forward(xp, handle, x, *, comm):
        pending = _PENDING.get(comm, {}).pop(int(handle), None)
        if pending is None:
            raise CommunicatorError(
                f"allreduce_wait: no pending all-reduce {int(handle)} on communicator {comm} "
                "(waited twice, or started in another process)"
            )
        if pending.request is not None:
            pending.request.Wait()
            if pending.reduction == "mean":
                pending.result /= pending.result.dtype.type(pending.size)
        return pending.result.reshape(x.shape)


def allreduce_start(x: Any, comm: Any, reduction: str = "sum") -> Any:
    """Start reducing ``x`` over the ranks of ``comm``; returns a handle for ``allreduce_wait``.

    Every rank must start its all-reduces in the same order. Not differentiable: the
    ``bucket_allreduce`` pass introduces it into already-differentiated graphs.

    Example:
        >>> from dualflow.distributed import create_communicator
        >>> comm = create_communicator("loopback")
        >>> handle = allreduce_start([1.0, 2.0], comm)
        >>> allreduce_wait(handle, [1.0, 2.0], comm).tolist()
        [1.0, 2.0]
    """
    comm_id = comm if isinstance(comm, int) else comm.comm_id
    return apply(AllReduceStart, x, comm=int(comm_id), reduction=reduction)


def allreduce_wait(handle: Any, x: Any, comm: Any) -> Any:
    """The result of the all-reduce ``handle`` started on ``x`` (the same as ``allreduce``).

    ``x`` must be the array the all-reduce was started on: taking it keeps it alive (MPI reads
    it while the request is in flight) and gives the result's shape and dtype.

    Example:
        >>> from dualflow.distributed import create_communicator
        >>> comm = create_communicator("loopback")
        >>> allreduce_wait(allreduce_start([3.0], comm, "mean"), [3.0], comm).tolist()
        [3.0]
    """
    comm_id = comm if isinstance(comm, int) else comm.comm_id
    return apply(AllReduceWait, handle, x, comm=int(comm_id))
