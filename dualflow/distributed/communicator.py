"""``Communicator``: the base of the MPI, NCCL and loopback communicators, and ``bcast_params``.

A subclass implements a handful of raw collectives on contiguous arrays and picklable objects;
the base builds the public API on them (out-of-place or ``out=`` all-reduce, array or object
broadcast) and registers itself so the ``allreduce`` op can find it by id.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow import ops
from dualflow.device import get_array_module
from dualflow.errors import CommunicatorError
from dualflow.ops.collective import REDUCTIONS, register_communicator
from dualflow.tensor import Tensor


class Communicator:
    """A group of ``size`` ranks; this object is rank ``rank``. Every call is collective.

    Example:
        >>> from dualflow.distributed import create_communicator
        >>> comm = create_communicator("loopback")
        >>> comm.rank, comm.size, comm.allreduce(np.array([1.0, 2.0])).tolist()
        (0, 1, [1.0, 2.0])
    """

    name = "base"

    def __init__(self, rank: int, size: int) -> None:
        self.rank, self.size = int(rank), int(size)
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

    def _bcast_obj(self, obj: Any, root: int) -> Any:
        raise NotImplementedError

    def _bcast_array(self, array: Any, root: int) -> None:
        """Overwrite ``array`` (contiguous, same shape everywhere) with root's in place."""
        raise NotImplementedError

    def allgather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj`` (picklable), in rank order, on every rank."""
        raise NotImplementedError

    def gather(self, obj: Any, root: int = 0) -> list[Any] | None:
        """Every rank's ``obj`` in rank order on ``root``; None elsewhere."""
        raise NotImplementedError

    def scatter(self, objs: list[Any] | None, root: int = 0) -> Any:
        """Item ``rank`` of root's list ``objs`` (one per rank) on each rank."""
        raise NotImplementedError

    def barrier(self) -> None:
        """Wait until every rank reaches this call."""
        raise NotImplementedError

    # ----- the public API built on them -------------------------------------------------------
    def allreduce_array(self, array: Any, reduction: str = "sum") -> Any:
        """The raw collective under the ``allreduce`` op: a new array (``mean`` divides by size).

        Example:
            >>> from dualflow.distributed import create_communicator
            >>> create_communicator("loopback").allreduce_array(np.ones(2), "mean").tolist()
            [1.0, 1.0]
        """
        if reduction not in REDUCTIONS:
            raise ValueError(f"allreduce: op must be one of {REDUCTIONS}, got {reduction!r}")
        out = self._allreduce_sum(array)
        if reduction == "mean":
            out /= out.dtype.type(self.size)
        return out

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
        if out is None:
            return self.allreduce_array(source, op)
        if op in REDUCTIONS and self._allreduce_sum_into(source, out):
            if op == "mean":
                out /= out.dtype.type(self.size)
        else:
            out[...] = self.allreduce_array(source, op)
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
        tensors = list(model.named_params()) + list(model.named_buffers())
        mine = [(name, tuple(t.shape), str(t.dtype)) for name, t in tensors]
        everyone = self.allgather(mine)
        for rank, theirs in enumerate(everyone):
            _compare_structure(everyone[root], theirs, root, rank)
        for _, t in tensors:
            xp = get_array_module(t._array)
            buffer = xp.ascontiguousarray(t._array)
            self._bcast_array(buffer, root)
            if buffer is not t._array:
                t._array[...] = buffer

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
