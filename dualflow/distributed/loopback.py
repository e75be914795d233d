"""The loopback communicator: N ranks as threads of one process, for fast, deterministic tests.

Ranks meet at a shared barrier: each posts its contribution into a slot, waits, reads every slot
(sums run in rank order, so all ranks get bit-identical results), and waits again before the
slots are reused. ``run_loopback(fn, size)`` runs ``fn(comm)`` on ``size`` threads.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from dualflow import arguments
from dualflow.distributed.agreement import Position
from dualflow.distributed.communicator import Communicator
from dualflow.distributed.watchdog import Timeout, constructor_timeout
from dualflow.errors import CommunicatorError


class PeerFailed(CommunicatorError):
    """A collective was abandoned because another rank failed, returned, or timed out."""


class CollectiveTimeout(PeerFailed):
    """This rank's collective did not complete within its communicator's timeout."""


class LoopbackHub:
    """The rendezvous shared by the ranks of one loopback group.

    ``timeout`` (default ``DUALFLOW_COLLECTIVE_TIMEOUT`` or 300 s) is its communicators'
    initial ``timeout``. The hub knows where every rank is, so a timed-out rank says which
    ranks have not arrived, and a rank that returned from ``run_loopback``'s function while
    others wait in (or later enter) a collective fails them at once.

    Example:
        >>> LoopbackHub(2).size
        2
    """

    timeout = Timeout()  # validated on every assignment

    def __init__(self, size: int, timeout: float | None = None) -> None:
        self.size = arguments.integer("LoopbackHub", "size", size)
        self.timeout = constructor_timeout(type(self).__name__, timeout)
        self.slots: list[Any] = [None] * size
        self.at: list[tuple[Position, bool] | None] = [None] * size  # (where, inside it)
        self.returned: set[int] = set()
        # A hand-made barrier: a rank released by its generation returns even if the group is
        # broken right after (threading.Barrier would raise in it then).
        self._cond = threading.Condition()
        self._count = self._generation = 0
        self._broken = False

    def exchange(
        self,
        rank: int,
        value: Any,
        read: Callable[[list], Any] = copy.deepcopy,
        timeout: float | None = None,
    ) -> Any:
        """Post ``value`` as ``rank``'s; return ``read(every rank's values)`` (a collective).

        ``read`` runs while every rank is still inside the call, so it may look at the other
        ranks' arrays before they are changed again (``allreduce(x, out=x)``).
        """
        self.slots[rank] = value
        self.wait(rank, timeout)
        try:
            return read(list(self.slots))
        finally:
            self.wait(rank, timeout)  # nobody changes or reposts its value before all have read

    def wait(self, rank: int, timeout: float | None = None) -> None:
        """Meet every rank (a barrier), or raise naming why not."""
        limit = self.timeout if timeout is None else timeout
        with self._cond:
            self._raise_if_broken(rank)
            generation = self._generation
            self._count += 1
            if self._count == self.size:
                self._count, self._generation = 0, generation + 1
                self._cond.notify_all()
                return
            deadline = time.monotonic() + limit
            while self._generation == generation:
                self._raise_if_broken(rank)
                left = deadline - time.monotonic()
                if left <= 0:
                    self._broken = True
                    self._cond.notify_all()
                    raise CollectiveTimeout(self._timeout_message(rank, limit))
                self._cond.wait(left)

    def _raise_if_broken(self, rank: int) -> None:
        if self.returned:
            raise PeerFailed(self._returned_message(rank))
        if self._broken:
            raise PeerFailed(
                "loopback: another rank failed or timed out while this one waited in a collective"
            )

    def abort(self) -> None:
        """A rank failed: every rank waiting in (or later entering) a collective raises."""
        with self._cond:
            self._broken = True
            self._cond.notify_all()

    def leave(self, rank: int) -> None:
        """``rank`` is done: ranks waiting for it (now or later) fail instead of waiting."""
        with self._cond:
            self.returned.add(rank)
            self._cond.notify_all()

    def _where(self, rank: int) -> str:
        at = self.at[rank]
        return "before its first collective" if at is None else at[0].describe()

    def _returned_message(self, rank: int) -> str:
        gone = ", ".join(str(r) for r in sorted(self.returned))
        return (
            f"loopback: rank(s) {gone} returned from the function while rank {rank} waits in "
            f"collective {self._where(rank)}; every rank must issue the same collectives"
        )

    def _timeout_message(self, rank: int, limit: float) -> str:
        mine = self.at[rank]
        seq = mine[0].seq if mine is not None else 0
        late = [
            f"rank {r} ({'waiting in' if at and at[1] else 'last finished'} {self._where(r)})"
            for r, at in enumerate(self.at)
            if r != rank and (at is None or at[0].seq < seq)
        ]
        missing = "not arrived: " + "; ".join(late) if late else "every rank has arrived"
        return (
            f"loopback: collective {self._where(rank)} did not complete within {limit:g} s "
            f"(comm.timeout); {missing}"
        )


class LoopbackCommunicator(Communicator):
    """Rank ``rank`` of a loopback group sharing ``hub``.

    Example:
        >>> comm = LoopbackCommunicator(LoopbackHub(1), 0)
        >>> comm.allgather("a")
        ['a']
    """

    name = "loopback"

    def __init__(self, hub: LoopbackHub, rank: int, timeout: float | None = None) -> None:
        if not isinstance(hub, LoopbackHub):
            raise arguments.fail("LoopbackCommunicator", "hub", hub, "must be a LoopbackHub")
        super().__init__(rank, hub.size, hub.timeout if timeout is None else timeout)
        self.hub = hub

    def _exchange(self, value: Any, read: Callable[[list], Any] = copy.deepcopy) -> Any:
        return self.hub.exchange(self.rank, value, read, self.timeout)

    def _allreduce_sum(self, array: Any) -> Any:
        return self._exchange(array, _sum_in_rank_order)

    def _exchange_max(self, vector: Any) -> Any:
        return self._exchange(vector, lambda values: np.maximum.reduce(values))

    def _bcast_obj(self, obj: Any, root: int) -> Any:
        return self._exchange(obj, lambda values: copy.deepcopy(values[root]))

    def _bcast_array(self, array: Any, root: int) -> None:
        def receive(values: list) -> None:
            _check_same(values, "bcast")
            if self.rank != root:
                array[...] = values[root]

        self._exchange(array, receive)

    def _allgather_raw(self, obj: Any) -> list[Any]:
        return self._exchange(obj)

    def _gather_raw(self, obj: Any, root: int) -> list[Any] | None:
        return self._exchange(obj, lambda v: copy.deepcopy(v) if self.rank == root else None)

    def _scatter_raw(self, objs: list[Any] | None, root: int) -> Any:
        def pick(values: list) -> Any:
            sent = values[root]
            if sent is None or len(sent) != self.size:
                raise CommunicatorError(
                    f"scatter: rank {root} must pass a list of {self.size} items"
                )
            return copy.deepcopy(sent[self.rank])

        return self._exchange(objs, pick)

    def _barrier_raw(self) -> None:
        self.hub.wait(self.rank, self.timeout)

    def _arm(self, position: Position) -> Any:
        self.hub.at[self.rank] = (position, True)
        return position

    def _disarm(self, token: Any) -> None:
        self.hub.at[self.rank] = (token, False)


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


def create_loopback_group(size: int, timeout: float | None = None) -> list[LoopbackCommunicator]:
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
            comm.hub.abort()  # wake the ranks waiting for this one
        else:
            comm.hub.leave(comm.rank)  # ranks still waiting for this one fail, not hang

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
