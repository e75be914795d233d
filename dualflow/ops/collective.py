"""Collective ops: ``allreduce`` across the ranks of a communicator (an ``impure`` primitive).

IR attrs are plain data, so the op names its communicator by an integer id; communicators
register themselves in ``COMMUNICATORS`` and the forward looks the id up at every call.
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


@primitive("allreduce", impure=True)
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
