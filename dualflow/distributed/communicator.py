"""``Communicator``: the base of the MPI, NCCL and loopback communicators, and ``bcast_params``.

A subclass implements raw collectives on contiguous arrays and picklable objects; the base builds
the public API on them, and every public collective first passes the ranks' agreement check
(``agreement.Ledger``: sequence number + signature, so a divergence raises on every rank instead of
hanging) and runs under the watchdog. It registers itself so the ``allreduce`` op finds it by id.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow import arguments, ops
from dualflow._tensor import Tensor
from dualflow.device import get_array_module
from dualflow.distributed.agreement import (
    KIND_COLLECTIVE,
    Ledger,
    Position,
    call_site,
    describe_array,
)
from dualflow.distributed.watchdog import default_timeout
from dualflow.errors import CommunicatorError
from dualflow.ops.collective import REDUCTIONS, register_communicator


class PendingAllreduce:
    """A started all-reduce: ``wait()`` returns the result (the same array every call).

    ``request`` is None when the transport ran it at once (loopback, NCCL, float16).
    """

    __slots__ = ("comm", "done", "finished", "position", "reduction", "request", "result", "source")

    def __init__(self, comm: Any, request: Any, result: Any, source: Any, reduction: str):
        # ``source`` keeps the array MPI reads alive until the wait, whatever the caller frees.
        self.comm, self.request, self.result, self.source = comm, request, result, source
        self.reduction, self.done, self.finished = reduction, request is None, False
        self.position: Position | None = None

    def test(self) -> bool:
        """Make progress; True once the transfer finished (never blocks)."""
        if not self.done and self.request.Test():
            self.done = True
        return self.done

    def wait(self) -> Any:
        """Block until done (under the watchdog); the reduced array."""
        if not self.finished:
            if not self.done:
                token = self.comm._arm(self.position)
                try:
                    self.request.Wait()
                finally:
                    self.comm._disarm(token)
            self.request, self.source, self.done, self.finished = None, None, True, True
            if self.reduction == "mean":
                self.result /= self.result.dtype.type(self.comm.size)
        return self.result


def checked_timeout(owner: str, timeout: Any) -> float:
    """A collective timeout in seconds: ``default_timeout()`` for None, else a finite number
    > 0 (ArgumentError naming ``owner`` otherwise).

    Example:
        >>> checked_timeout("LoopbackHub", 2)
        2.0
    """
    if timeout is None:
        return default_timeout()
    return arguments.real(owner, "timeout", timeout, 0.0, open_low=True, what="seconds")


class Communicator:
    """A group of ``size`` ranks; this object is rank ``rank``. Every call is collective.

    ``timeout`` (seconds; default ``DUALFLOW_COLLECTIVE_TIMEOUT`` or 300) is how long a
    collective may wait for the other ranks before the watchdog aborts the job; set it any time.

    Example:
        >>> from dualflow.distributed import create_communicator
        >>> comm = create_communicator("loopback")
        >>> comm.rank, comm.size, comm.allreduce(np.array([1.0, 2.0])).tolist()
        (0, 1, [1.0, 2.0])
    """

    name = "base"

    def __init__(self, rank: int, size: int, timeout: float | None = None) -> None:
        name = type(self).__name__
        self.size = arguments.integer(name, "size", size)
        self.rank = arguments.integer(name, "rank", rank, minimum=0)
        if self.rank >= self.size:
            raise arguments.fail(name, "rank", rank, f"must be below the group size {size}")
        self.timeout = checked_timeout(name, timeout)
        self.ledger = Ledger(self)
        self._armed: tuple[float, Position] | None = None
        # step() calls of multi-node optimizers on this communicator: every rank's must match
        self.optimizer_steps = 0
        self.comm_id = register_communicator(self)

    # ----- what a subclass implements ---------------------------------------------------------
    def _allreduce_sum(self, array: Any) -> Any:
        """A new array: the element-wise sum of ``array`` over the ranks."""
        raise NotImplementedError

    def _allreduce_sum_into(self, array: Any, out: Any) -> bool:
        """Sum ``array`` over the ranks straight into ``out``; False if this case is not handled.

        The default handles nothing (the caller then copies a new array into ``out``); MPI
        overrides it so ``allreduce(x, out=y)`` costs what a raw ``Allreduce`` does.
        """
        return False

    def _post_allreduce(self, array: Any) -> tuple[Any, Any]:
        """Start summing ``array``: ``(request, result buffer)``; request None if done already."""
        return None, self._allreduce_sum(array)

    def _bcast_obj(self, obj: Any, root: int) -> Any:
        raise NotImplementedError

    def _bcast_array(self, array: Any, root: int) -> None:
        """Overwrite ``array`` (contiguous, same shape everywhere) with root's in place."""
        raise NotImplementedError

    def _allgather_raw(self, obj: Any) -> list[Any]:
        raise NotImplementedError

    def _gather_raw(self, obj: Any, root: int) -> list[Any] | None:
        raise NotImplementedError

    def _scatter_raw(self, objs: list[Any] | None, root: int) -> Any:
        raise NotImplementedError

    def _barrier_raw(self) -> None:
        raise NotImplementedError

    def _exchange_max(self, vector: np.ndarray) -> np.ndarray:
        """The element-wise maximum of an int64 vector over the ranks (the agreement check)."""
        raise NotImplementedError

    def _arm(self, position: Position) -> Any:
        """A blocking wait for ``position`` begins (the watchdog starts its clock)."""
        return None

    def _disarm(self, token: Any) -> None:
        """The wait armed by ``_arm`` is over."""

    def abort(self, message: str) -> None:
        """End the whole job after printing ``message`` (a collective that cannot complete)."""
        raise CommunicatorError(message)

    # ----- the checked collectives --------------------------------------------------------------
    def _begin(self, text: str, site: str | None = None) -> Position:
        """Agree with every rank that this is the next collective (raises if not)."""
        self.ledger.check(KIND_COLLECTIVE, text, call_site() if site is None else site)
        return self.ledger.last

    def _blocking(self, text: str, run: Any, *args: Any) -> Any:
        position = self._begin(text)
        token = self._arm(position)
        try:
            return run(*args)
        finally:
            self._disarm(token)

    def allgather(self, obj: Any, what: str = "allgather") -> list[Any]:
        """Every rank's ``obj`` (picklable), in rank order, on every rank.

        ``what`` names the collective in the error if the ranks disagree.
        """
        return self._blocking(what, self._allgather_raw, obj)

    def gather(self, obj: Any, root: int = 0) -> list[Any] | None:
        """Every rank's ``obj`` in rank order on ``root``; None elsewhere."""
        self._check_root(root)
        return self._blocking(f"gather root={root}", self._gather_raw, obj, root)

    def scatter(self, objs: list[Any] | None, root: int = 0) -> Any:
        """Item ``rank`` of root's list ``objs`` (one per rank) on each rank."""
        self._check_root(root)
        return self._blocking(f"scatter root={root}", self._scatter_raw, objs, root)

    def barrier(self) -> None:
        """Wait until every rank reaches this call."""
        self._blocking("barrier", self._barrier_raw)

    def agree(self, what: str) -> None:
        """A collective that moves no data: every rank must be at the same ``agree(what)``.

        Raises:
            CommunicatorError: on every rank, naming each rank's collective, if they are not.

        Example:
            >>> from dualflow.distributed import create_communicator
            >>> create_communicator("loopback").agree("epoch 1 done")
        """
        self._begin(what)

    def start_allreduce(
        self,
        array: Any,
        reduction: str = "sum",
        *,
        bucket: int | None = None,
        agreed: bool = False,
        site: str | None = None,
    ) -> PendingAllreduce:
        """Start reducing ``array`` over the ranks; ``.wait()`` on the result gives it.

        With MPI and a dtype MPI can sum this is a non-blocking ``Iallreduce``; otherwise the
        reduction happens now. ``agreed`` skips the check (a compiled plan whose whole sequence
        of collectives the ranks agreed on at its first one).

        Example:
            >>> from dualflow.distributed import create_communicator
            >>> comm = create_communicator("loopback")
            >>> comm.start_allreduce(np.array([2.0]), "mean").wait().tolist()
            [2.0]
        """
        if reduction not in REDUCTIONS:
            raise ValueError(f"allreduce: op must be one of {REDUCTIONS}, got {reduction!r}")
        text = describe_array("allreduce", array, reduction, bucket)
        if agreed:
            position = self.ledger.count(
                KIND_COLLECTIVE, text, call_site() if site is None else site
            )
        else:
            position = self._begin(text, site)
        request, result = self._post_allreduce(array)
        pending = PendingAllreduce(self, request, result, array, reduction)
        pending.position = position
        return pending

    def allreduce_array(self, array: Any, reduction: str = "sum", **options: Any) -> Any:
        """The raw collective under the ``allreduce`` op: a new array (``mean`` divides by size).

        Example:
            >>> from dualflow.distributed import create_communicator
            >>> create_communicator("loopback").allreduce_array(np.ones(2), "mean").tolist()
            [1.0, 1.0]
        """
        return self.start_allreduce(array, reduction, **options).wait()

    def allreduce(self, array: Any, op: str = "sum", out: Any = None) -> Any:
        """All-reduce ``array`` (numpy/cupy array, or a Tensor through the traceable op).

        Args:
            array: the local contribution; same shape and dtype on every rank.
            op: ``"sum"`` or ``"mean"``.
            out: an array to write the result into (in place; may be ``array`` itself).

        Returns:
            A new array (or Tensor), or ``out`` when given.

        Example:
            >>> from dualflow.distributed import create_communicator
            >>> comm = create_communicator("loopback")
            >>> x = np.array([3.0]); comm.allreduce(x, out=x) is x
            True
        """
        if isinstance(array, Tensor):
            if out is not None:
                raise ValueError("allreduce: out= takes arrays, not Tensors; use ops.assign")
            return ops.allreduce(array, self, op)
        source = get_array_module(array).ascontiguousarray(array)
        if out is None or op not in REDUCTIONS:
            result = self.allreduce_array(source, op)
            if out is None:
                return result
            out[...] = result
            return out
        position = self._begin(describe_array("allreduce", source, op))
        token = self._arm(position)
        try:
            direct = self._allreduce_sum_into(source, out)
            if not direct:
                out[...] = self._allreduce_sum(source)
        finally:
            self._disarm(token)
        if op == "mean":
            out /= out.dtype.type(self.size)
        return out

    def bcast(self, obj: Any, root: int = 0) -> Any:
        """Root's ``obj`` on every rank: arrays travel as buffers, anything else is pickled.

        Non-root ranks pass an array of the same shape and dtype (overwritten in place and
        returned) or any placeholder (e.g. None) for an object.

        Example:
            >>> from dualflow.distributed import create_communicator
            >>> create_communicator("loopback").bcast({"lr": 0.1})
            {'lr': 0.1}
        """
        self._check_root(root)
        return self._blocking(f"bcast root={root}", self._bcast_any, obj, root)

    def _bcast_any(self, obj: Any, root: int) -> Any:
        is_array = self._bcast_obj(_is_array(obj), root)
        if not is_array:
            return self._bcast_obj(obj, root)
        if not _is_array(obj) or not obj.flags.c_contiguous:
            raise CommunicatorError(
                f"bcast: rank {root} sends an array, so rank {self.rank} must pass a contiguous "
                f"array of the same shape and dtype to receive it, got {type(obj).__name__}"
            )
        self._bcast_array(obj, root)
        return obj

    def bcast_params(self, model: Any, root: int = 0) -> None:
        """Copy root's parameters and buffers into this rank's model, in place (set-up time).

        Raises:
            CommunicatorError: this rank's (name, shape, dtype) list differs from root's; the
                message names the first mismatching entry. Nothing is written then.

        Example:
            >>> from dualflow import nn
            >>> from dualflow.distributed import create_communicator
            >>> create_communicator("loopback").bcast_params(nn.Linear(2, 3))
        """
        self._check_root(root)
        tensors = list(model.named_params()) + list(model.named_buffers())
        mine = [(name, tuple(t.shape), str(t.dtype)) for name, t in tensors]
        everyone = self.allgather(mine)
        for rank, theirs in enumerate(everyone):
            _compare_structure(everyone[root], theirs, root, rank)
        position = self.ledger.count(KIND_COLLECTIVE, f"bcast_params root={root}", call_site())
        token = self._arm(position)  # the layouts agree: the broadcasts pair up one to one
        try:
            for _, t in tensors:
                xp = get_array_module(t._array)
                buffer = xp.ascontiguousarray(t._array)
                self._bcast_array(buffer, root)
                if buffer is not t._array:
                    t._array[...] = buffer
        finally:
            self._disarm(token)

    def _check_root(self, root: int) -> None:
        if not 0 <= root < self.size:
            raise CommunicatorError(f"root {root} is not a rank of this {self.size}-rank group")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} rank {self.rank} of {self.size}>"


def _is_array(obj: Any) -> bool:
    return isinstance(obj, np.ndarray) or hasattr(obj, "__cuda_array_interface__")


def _compare_structure(root_list: list, other: list, root: int, rank: int) -> None:
    """Raise CommunicatorError naming the first (name, shape, dtype) where ``other`` differs."""
    for index in range(max(len(root_list), len(other))):
        want = root_list[index] if index < len(root_list) else None
        got = other[index] if index < len(other) else None
        if want != got:
            raise CommunicatorError(
                f"bcast_params: rank {rank}'s model differs from rank {root}'s at parameter "
                f"#{index}: rank {root} has {_describe(want)}, rank {rank} has {_describe(got)}; "
                "build the same model on every rank"
            )


def _describe(entry: tuple | None) -> str:
    if entry is None:
        return "nothing"
    name, shape, dtype = entry
    return f"{name!r} {shape} {dtype}"
