"""The loopback communicator: N ranks as threads of one process, for fast, deterministic tests.

Ranks meet at a shared barrier: each posts its contribution into a slot, waits, reads every slot
(sums run in rank order, so all ranks get bit-identical results), and waits again before the
slots are reused. ``run_loopback(fn, size)`` runs ``fn(comm)`` on ``size`` threads.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any

from dualflow.distributed.communicator import Communicator
from dualflow.errors import CommunicatorError


class PeerFailed(CommunicatorError):
    """A collective was abandoned because another rank failed (or the wait timed out)."""


class LoopbackHub:
    """The rendezvous shared by the ranks of one loopback group.

    Example:
        >>> LoopbackHub(2).size
        2
    """

    def __init__(self, size: int, timeout: float = 60.0) -> None:
        if size < 1:
            raise ValueError(f"a loopback group needs size >= 1, got {size}")
        self.size = size
        self.slots: list[Any] = [None] * size
        self.barrier = threading.Barrier(size, timeout=timeout)

    def exchange(self, rank: int, value: Any, read: Callable[[list], Any] = copy.deepcopy) -> Any:
        """Post ``value`` as ``rank``'s; return ``read(every rank's values)`` (a collective).

        ``read`` runs while every rank is still inside the call, so it may look at the other
        ranks' arrays before they are changed again (``allreduce(x, out=x)``).
        """
        self.slots[rank] = value
        self._wait()
        try:
            return read(list(self.slots))
        finally:
            self._wait()  # nobody changes or reposts its value before everyone has read it

    def _wait(self) -> None:
        try:
            self.barrier.wait()
        except threading.BrokenBarrierError:
            raise PeerFailed(
                "loopback: another rank failed or timed out while this one waited in a collective"
            ) from None


class LoopbackCommunicator(Communicator):
    """Rank ``rank`` of a loopback group sharing ``hub``.

    Example:
        >>> comm = LoopbackCommunicator(LoopbackHub(1), 0)
        >>> comm.allgather("a")
        ['a']
    """

    name = "loopback"

    def __init__(self, hub: LoopbackHub, rank: int) -> None:
        if not 0 <= rank < hub.size:
            raise ValueError(f"rank {rank} is outside a loopback group of size {hub.size}")
        super().__init__(rank, hub.size)
        self.hub = hub

    def _allreduce_sum(self, array: Any) -> Any:
        return self.hub.exchange(self.rank, array, _sum_in_rank_order)

    def _bcast_obj(self, obj: Any, root: int) -> Any:
        return self.hub.exchange(self.rank, obj, lambda values: copy.deepcopy(values[root]))

    def _bcast_array(self, array: Any, root: int) -> None:
        def receive(values: list) -> None:
            _check_same(values, "bcast")
            if self.rank != root:
                array[...] = values[root]

        self.hub.exchange(self.rank, array, receive)

    def allgather(self, obj: Any) -> list[Any]:
        return self.hub.exchange(self.rank, obj)

    def gather(self, obj: Any, root: int = 0) -> list[Any] | None:
        return self.hub.exchange(
            self.rank, obj, lambda v: copy.deepcopy(v) if self.rank == root else None
        )

    def scatter(self, objs: list[Any] | None, root: int = 0) -> Any:
        def pick(values: list) -> Any:
            sent = values[root]
            if sent is None or len(sent) != self.size:
                raise CommunicatorError(
                    f"scatter: rank {root} must pass a list of {self.size} items"
                )
            return copy.deepcopy(sent[self.rank])

        return self.hub.exchange(self.rank, objs, pick)

    def barrier(self) -> None:
        self.hub._wait()


def _sum_in_rank_order(values: list[Any]) -> Any:
    _check_same(values, "allreduce")
    total = values[0].copy()
    for value in values[1:]:  # rank order: deterministic, identical on every rank
        total += value
    return total


def _check_same(values: list[Any], what: str) -> None:
    shapes = [(tuple(v.shape), str(v.dtype)) for v in values]
    if len(set(shapes)) > 1:
        raise CommunicatorError(
            f"{what}: ranks passed arrays of different shapes/dtypes (in rank order): {shapes}"
        )


def create_loopback_group(size: int, timeout: float = 60.0) -> list[LoopbackCommunicator]:
    """One communicator per rank of a new loopback group (hand each to its own thread).

    Example:
        >>> [c.rank for c in create_loopback_group(3)]
        [0, 1, 2]
    """
    hub = LoopbackHub(size, timeout)
    return [LoopbackCommunicator(hub, rank) for rank in range(size)]


def run_loopback(fn: Callable[[LoopbackCommunicator], Any], size: int = 2) -> list[Any]:
    """Run ``fn(comm)`` for every rank of a new loopback group, each on its own thread.

    Returns:
        The ranks' results in rank order.

    Raises:
        The first exception a rank raised (the others are released from their collectives).

    Example:
        >>> import numpy as np
        >>> run_loopback(lambda comm: comm.allreduce(np.array([comm.rank + 1.0])).item(), 2)
        [3.0, 3.0]
    """
    comms = create_loopback_group(size)
    results: list[Any] = [None] * size
    errors: list[tuple[int, BaseException]] = []

    def main(comm: LoopbackCommunicator) -> None:
        try:
            results[comm.rank] = fn(comm)
        except BaseException as exc:  # re-raised in the calling thread
            errors.append((comm.rank, exc))
            comm.hub.barrier.abort()  # wake the ranks waiting for this one

    threads = [threading.Thread(target=main, args=(c,), name=f"rank{c.rank}") for c in comms]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        # A rank that failed by itself comes first; the others failed because it broke the barrier.
        errors.sort(key=lambda e: isinstance(e[1], PeerFailed))
        raise errors[0][1]
    return results
