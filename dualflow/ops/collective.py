"""Collective ops: ``allreduce`` and its split form ``allreduce_start``/``allreduce_wait``.

IR attrs are plain data, so the ops name their communicator by an integer id (``COMMUNICATORS``);
a start's output, a 0-d int64 key into a per-communicator table of pending requests, is the
handle its wait consumes, so the overlap is ordinary data flow in the graph.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator
from contextvars import ContextVar
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

    ``comm`` needs ``allreduce_array(array, reduction, **options) -> new array`` and
    ``start_allreduce(array, reduction, **options)`` returning an object with ``wait()`` and
    ``test()`` (``dualflow.distributed.Communicator`` has both).

    Example:
        >>> class Solo:
        ...     def allreduce_array(self, array, reduction, **options):
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


# The compiled call whose plan is running (set by dualflow.tracer.collective_agreement): its
# first collective makes the ranks agree on the plan's whole sequence of collectives, after
# which the plan's collectives skip their own checks.
_PLAN_CALL: ContextVar[Any] = ContextVar("dualflow_plan_call", default=None)


def set_plan_call(call: Any) -> Any:
    """Make ``call`` (with ``agreed(comm_id) -> bool``) the running plan's; returns a token.

    Example:
        >>> reset_plan_call(set_plan_call(None))
    """
    return _PLAN_CALL.set(call)


def reset_plan_call(token: Any) -> None:
    """Undo ``set_plan_call``."""
    _PLAN_CALL.reset(token)


class _Activity(threading.local):
    """Per thread (loopback ranks are threads of one process): how many collectives it ran
    and, per communicator id, the count at its last one. Set in ``__init__`` (each thread's
    first use): a ``getattr`` default on a missing attribute costs ~0.8 us, and every compiled
    call reads these twice."""

    def __init__(self) -> None:
        self.count = 0
        self.last: dict[int, int] = {}


_activity = _Activity()


def note_collective(comm_id: int) -> None:
    """Record that this thread ran a collective on ``comm_id`` (communicators call it).

    Example:
        >>> before = collective_activity()[0]; note_collective(7); collective_activity()[0] - before
        1
    """
    activity = _activity
    activity.count += 1
    activity.last[comm_id] = activity.count


def collective_activity() -> tuple[int, dict[int, int]]:
    """This thread's collective count and, per communicator id, the count at its last one."""
    activity = _activity
    return activity.count, activity.last


class _Agreed:
    def __init__(self, comm_id: int) -> None:
        self.comm_id = comm_id

    def agreed(self, comm_id: int) -> bool:
        return comm_id == self.comm_id


@contextlib.contextmanager
def agreed_collectives(comm: Any) -> Iterator[None]:
    """All-reduce ops on ``comm`` inside skip their own check: the ranks already agreed on them.

    The multi-node optimizer agrees on its whole bucket layout once per step; its buckets'
    all-reduces then pair one to one on every rank.

    Example:
        >>> from dualflow.distributed import create_communicator
        >>> comm = create_communicator("loopback")
        >>> with agreed_collectives(comm):
        ...     allreduce([1.0], comm).tolist()
        [1.0]
    """
    comm_id = comm if isinstance(comm, int) else comm.comm_id
    token = _PLAN_CALL.set(_Agreed(comm_id))
    try:
        yield
    finally:
        _PLAN_CALL.reset(token)


def _agreed(comm: int) -> bool:
    call = _PLAN_CALL.get()
    return call is not None and call.agreed(comm)


def _check(x: Meta, comm: int, reduction: str, bucket: int | None = None) -> None:
    if reduction not in REDUCTIONS:
        raise ValueError(f"allreduce: reduction must be one of {REDUCTIONS}, got {reduction!r}")
    if isinstance(x.dtype, type):
        raise DTypeError("allreduce: the input must be an array or tensor, not a Python scalar")
    if reduction == "mean" and np.dtype(x.dtype).kind != "f":
        raise DTypeError(f"allreduce: reduction 'mean' needs a float input, got {x.dtype}")
    if bucket is not None and (type(bucket) is not int or bucket < 0):
        raise ValueError(f"allreduce: bucket must be a non-negative int, got {bucket!r}")
    lookup_communicator(comm)


def _contiguous(xp: Any, x: Any) -> Any:
    """``x`` as a C-contiguous array of its own shape (``ascontiguousarray`` makes 0-d 1-d)."""
    return xp.ascontiguousarray(x).reshape(x.shape)


def _attrs(comm: Any, reduction: str, bucket: int | None) -> dict[str, Any]:
    comm_id = comm if isinstance(comm, int) else comm.comm_id
    attrs: dict[str, Any] = {"comm": int(comm_id), "reduction": reduction}
    if bucket is not None:  # only the multi-node optimizer's buckets carry one
        attrs["bucket"] = bucket
    return attrs


@primitive(
    "allreduce",
    impure=True,
    collective=True,
    split=("allreduce_start", "allreduce_wait", "allreduce_progress"),  # bucket_allreduce
)
class AllReduce:
    """Sum (or mean) of ``x`` over every rank of communicator ``comm``; every rank gets it.

    ``bucket`` (optional) is the multi-node optimizer's bucket index: part of the signature the
    ranks compare before the data moves.
    """

    def infer(x: Meta, *, comm: int, reduction: str, bucket: int | None = None) -> tuple[Meta]:
        _check(x, comm, reduction, bucket)
        return (Meta(tuple(x.shape), x.dtype),)

    def forward(xp, x, *, comm, reduction, bucket=None):
        return lookup_communicator(comm).allreduce_array(
            _contiguous(xp, x), reduction, bucket=bucket, agreed=_agreed(comm)
        )

    def backward(ctx, gy):
        # y = reduce_k x_k on every rank and the loss sums every rank's part, so
        # dL/dx_r = reduce_k gy_k: the same collective on the gradients.
        return (apply(AllReduce, gy, **ctx.attrs),)


def allreduce(x: Any, comm: Any, reduction: str = "sum", bucket: int | None = None) -> Any:
    """Reduce ``x`` over the ranks of ``comm`` (a Communicator or its integer id).

    Every rank must call it in the same order with the same shape and dtype (the ranks check
    this before the data moves and raise ``CommunicatorError`` on every rank otherwise).
    Differentiable: the gradient of a sum (mean) all-reduce is the sum (mean) all-reduce of the
    gradients.

    Example:
        >>> from dualflow import ops
        >>> from dualflow.distributed import create_communicator
        >>> comm = create_communicator("loopback")  # one rank: the identity
        >>> ops.allreduce([1.0, 2.0], comm).tolist()
        [1.0, 2.0]
    """
    return apply(AllReduce, x, **_attrs(comm, reduction, bucket))


# ----- split all-reduce: a non-blocking start and its wait (scheduled by bucket_allreduce) -----
# comm id -> request key -> the communicator's PendingAllreduce; keys are per communicator, so
# loopback ranks (one communicator per thread) never share a table.
_PENDING: dict[int, dict[int, Any]] = {}
_KEYS: dict[int, itertools.count] = {}


# a start returns a new 0-d key, a wait the request's own receive buffer (never ``x``); the
# start's input outlives the request because the wait reads it as its second operand
@primitive("allreduce_start", impure=True, collective=True, aliasing="fresh", async_role="start")
class AllReduceStart:
    """Start a non-blocking all-reduce of ``x``; the output is the request's 0-d int64 key."""

    def infer(x: Meta, *, comm: int, reduction: str, bucket: int | None = None) -> tuple[Meta]:
        _check(x, comm, reduction, bucket)
        return (Meta((), np.dtype(np.int64)),)

    def forward(xp, x, *, comm, reduction, bucket=None):
        communicator = lookup_communicator(comm)
        pending = communicator.start_allreduce(
            _contiguous(xp, x), reduction, bucket=bucket, agreed=_agreed(comm)
        )
        key = next(_KEYS.setdefault(comm, itertools.count()))
        _PENDING.setdefault(comm, {})[key] = pending
        # the key stays on the host even on a GPU: the wait reads it with int(), which on a
        # device array would synchronize the stream in the middle of the step
        return np.asarray(key, dtype=np.int64)


@primitive("allreduce_wait", impure=True, collective=True, aliasing="fresh", async_role="wait")
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
        return pending.wait().reshape(x.shape)


def progress(comm: int) -> int:
    """Let every all-reduce in flight on communicator ``comm`` progress; how many are left.

    MPICH moves a non-blocking transfer only inside MPI calls; testing the requests between
    other work is what lets them overlap it without a helper thread. Never blocks.

    Example:
        >>> progress(-1)  # nothing in flight: nothing to do
        0
    """
    return sum(not pending.test() for pending in _PENDING.get(comm, {}).values())


@primitive("allreduce_progress", impure=True, async_role="progress")
class AllReduceProgress:
    """Test the all-reduces in flight on ``comm`` (``handle``: one of them, for ordering).

    ``bucket_allreduce`` puts one after each large step while requests are in flight; the
    output (how many were still in flight) is not read by anything.
    """

    def infer(handle: Meta, *, comm: int) -> tuple[Meta]:
        if tuple(handle.shape) != () or np.dtype(handle.dtype) != np.int64:
            raise DTypeError("allreduce_progress: the handle must be an allreduce_start output")
        lookup_communicator(comm)
        return (Meta((), np.dtype(np.int64)),)

    def forward(xp, handle, *, comm):
        return np.asarray(progress(comm), dtype=np.int64)


def allreduce_progress(handle: Any, comm: Any) -> Any:
    """Let the all-reduces in flight on ``comm`` make progress; returns how many are left.

    Example:
        >>> from dualflow.distributed import create_communicator
        >>> comm = create_communicator("loopback")  # loopback reduces at the start
        >>> allreduce_progress(allreduce_start([1.0], comm), comm).item()
        0
    """
    comm_id = comm if isinstance(comm, int) else comm.comm_id
    return apply(AllReduceProgress, handle, comm=int(comm_id))


def allreduce_start(x: Any, comm: Any, reduction: str = "sum", bucket: int | None = None) -> Any:
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
    return apply(AllReduceStart, x, **_attrs(comm, reduction, bucket))


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
