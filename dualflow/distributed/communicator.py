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
from dualflow._config import no_grad
from dualflow.device import get_array_module
from dualflow.distributed.agreement import (
    FAILED,
    KIND_COLLECTIVE,
    OK,
    Ledger,
    Position,
    array_problem,
    call_site,
    describe_array,
)
from dualflow.distributed.layout import compare_structure
from dualflow.distributed.pending import PendingAllreduce
from dualflow.distributed.watchdog import Timeout, constructor_timeout
from dualflow.errors import CommunicatorError
from dualflow.ops.collective import REDUCTIONS, register_communicator
from dualflow.tensor.core import Tensor


class Communicator:
    """A group of ``size`` ranks; this object is rank ``rank``. Every call is collective.

    ``timeout`` (seconds; default ``DUALFLOW_COLLECTIVE_TIMEOUT`` or 300) is how long a
    collective may wait for the other ranks before the watchdog aborts the job; set it any time
    (a finite number > 0, checked at the assignment).

    Example:
        >>> from dualflow.distributed import create_communicator
        >>> comm = create_communicator("loopback")
        >>> comm.rank, comm.size, comm.allreduce(np.array([1.0, 2.0])).tolist()
        (0, 1, [1.0, 2.0])
    """

    name = "base"
    timeout = Timeout()  # validated on every assignment (ConfigError naming the range)

    def __init__(self, rank: int, size: int, timeout: float | None = None) -> None:
        name = type(self).__name__
        self.size = arguments.integer(name, "size", size)
        self.rank = arguments.integer(name, "rank", rank, minimum=0)
        if self.rank >= self.size:
            raise arguments.fail(name, "rank", rank, f"must be below the group size {size}")
        self.timeout = constructor_timeout(type(self).__name__, timeout)
        self.ledger = Ledger(self)
        self._armed: tuple[float, Position] | None = None
        # step() calls of multi-node optimizers on this communicator: every rank's must match.
        # A tensor, so a compiled step's plan counts it like eager and a failed call rolls it
        # back with the rest of its state.
        self.step_counter = Tensor(np.zeros((), np.int64))
        self.comm_id = register_communicator(self)

    @property
    def optimizer_steps(self) -> int:
        """How many multi-node optimizer ``step()`` calls this rank committed on this group."""
        return int(self.step_counter.raw_array)  # the array itself: no trace reads it

    def count_optimizer_step(self, like: Any = None) -> None:
        """One more committed ``step()`` (an in-place write a compiled step records).

        ``like`` (a parameter) puts the count on its device at the first step: a compiled plan
        runs on one device.
        """
        counter = self.step_counter
        if like is not None:
            xp = get_array_module(like.raw_array)
            if get_array_module(counter.raw_array) is not xp:
                counter = self.step_counter = Tensor(xp.asarray(counter.raw_array))
        with no_grad():
            ops.assign(counter, ops.add(counter, 1))

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

    def _array_problem(self, array: Any) -> str:
        """Why this backend cannot move ``array`` (``""`` if it can); NCCL adds its dtypes."""
        return array_problem(array)

    # ----- the checked collectives --------------------------------------------------------------
    def _begin(self, text: str, site: str | None = None, problem: str = "") -> Position:
        """Agree with every rank that this is the next collective (raises if not).

        ``text`` holds what every rank must pass alike (op, root, shape, dtype); ``problem``
        says why this rank cannot take part. Either way every rank raises the same error
        before any data moves, on every backend.
        """
        flag = FAILED if problem else OK
        where = call_site() if site is None else site
        self.ledger.check(KIND_COLLECTIVE, text, where, flag, problem)
        return self.ledger.last

    def _blocking(self, text: str, run: Any, *args: Any, problem: str = "") -> Any:
        position = self._begin(text, problem=problem)
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
        problem = self._root_problem(root)
        return self._blocking(f"gather root={root}", self._gather_raw, obj, root, problem=problem)

    def scatter(self, objs: list[Any] | None, root: int = 0) -> Any:
        """Item ``rank`` of root's list ``objs`` (one per rank) on each rank."""
        problem = self._root_problem(root)
        if (
            not problem
            and self.rank == root
            and (not hasattr(objs, "__len__") or len(objs) != self.size)
        ):
            problem = f"scatter: rank {root} must pass a list of {self.size} items"
        text = f"scatter root={root}"
        return self._blocking(text, self._scatter_raw, objs, root, problem=problem)

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
        if agreed:  # the plan's (or the layout's) agreement covered shapes and dtypes
            position = self.ledger.count(
                KIND_COLLECTIVE, text, call_site() if site is None else site
            )
        else:
            position = self._begin(text, site, self._reduce_problem(array, reduction))
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
        source = _contiguous(array)
        if out is None or op not in REDUCTIONS:
            result = self.allreduce_array(source, op)
            if out is None:
                return result
            out[...] = result
            return out
        problem = self._reduce_problem(source, op)
        if not problem and (out.shape != source.shape or out.dtype != source.dtype):
            problem = (
                f"allreduce: out= must be an array like the input ({_like(source)}) on rank "
                f"{self.rank}, got {_like(out)}"
            )
        position = self._begin(describe_array("allreduce", source, op), problem=problem)
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
        returned) or any placeholder (e.g. None) for an object. The ranks agree on that
        (array shape and dtype, or object) before any data moves: a mismatch raises
        ``CommunicatorError`` on every rank.

        Example:
            >>> from dualflow.distributed import create_communicator
            >>> create_communicator("loopback").bcast({"lr": 0.1})
            {'lr': 0.1}
        """
        if not _is_array(obj):
            text, problem = f"bcast root={root} object", self._root_problem(root)
            return self._blocking(text, self._bcast_obj, obj, root, problem=problem)
        problem = self._root_problem(root) or self._array_problem(obj)
        if not problem and self.rank != root and not obj.flags.writeable:
            problem = f"bcast: rank {self.rank}'s receiving array is read-only"
        text = describe_array(f"bcast root={root}", obj)
        return self._blocking(text, self._bcast_into, obj, root, problem=problem)

    def _bcast_into(self, array: Any, root: int) -> Any:
        buffer = _contiguous(array)
        self._bcast_array(buffer, root)
        if buffer is not array and self.rank != root:  # a non-contiguous receiver
            array[...] = buffer
        return array

    def _reduce_problem(self, array: Any, reduction: str) -> str:
        problem = self._array_problem(array)
        if not problem and reduction == "mean" and np.dtype(array.dtype).kind not in "fc":
            problem = f"allreduce: reduction 'mean' needs a float array, got {array.dtype}"
        return problem

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
            compare_structure(everyone[root], theirs, root, rank)
        position = self.ledger.count(KIND_COLLECTIVE, f"bcast_params root={root}", call_site())
        token = self._arm(position)  # the layouts agree: the broadcasts pair up one to one
        try:
            for _, t in tensors:
                # .array: a compiled call fails closed (a graph cannot replay the broadcast) and
                # lazy re-execution runs pending writes first; the result is a state write
                buffer = _contiguous(t.array)
                buffer = buffer.copy() if buffer is t.raw_array else buffer
                self._bcast_array(buffer, root)
                with no_grad():
                    ops.assign(t, buffer)
        finally:
            self._disarm(token)

    def _check_root(self, root: int) -> None:
        problem = self._root_problem(root)
        if problem:
            raise CommunicatorError(problem)

    def _root_problem(self, root: Any) -> str:
        if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < self.size:
            return f"root {root!r} is not a rank of this {self.size}-rank group"
        return ""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} rank {self.rank} of {self.size}>"


def _is_array(obj: Any) -> bool:
    return isinstance(obj, np.ndarray) or hasattr(obj, "__cuda_array_interface__")


def _contiguous(array: Any) -> Any:
    """``array`` itself when C-contiguous, else a contiguous copy of the same shape
    (``ascontiguousarray`` alone turns a 0-d array into shape (1,))."""
    xp = get_array_module(array)
    array = xp.asarray(array)
    return array if array.flags.c_contiguous else xp.ascontiguousarray(array)


def _like(array: Any) -> str:
    return describe_array("", array).strip()
