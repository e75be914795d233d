"""The gradient reducer: each bucket's all-reduce starts while backward is still running (DDP).

It watches the multi-node optimizer's parameters as a backward observer. As each parameter's
gradient becomes final it counts down its bucket, and buckets start in bucket order (every rank
issues the same collectives) as soon as all their gradients exist; right before the first one the
layout is checked with the other ranks. Eagerly a start is a non-blocking ``Iallreduce``, tested
after every backward node (MPI progress without a helper thread); under the tracer it is a traced
``allreduce``, which ``bucket_allreduce`` splits. At the end of backward every ``.grad`` holds the
average over the ranks, as in PyTorch DDP; the optimizer's ``step()`` then only updates."""

from __future__ import annotations

import weakref
from typing import Any

from dualflow import ops
from dualflow._config import no_grad
from dualflow.autograd.observers import add_backward_observer
from dualflow.device import get_array_module
from dualflow.ops.collective import agreed_collectives
from dualflow.ops.dispatch import tracing
from dualflow.tensor.core import Tensor


class GradReducer:
    """Averages the gradients of ``optimizer``'s parameters during backward (see the module).

    ``averaged`` is True from the end of a backward that reduced every bucket until the next
    ``step()`` or ``zero_grad()`` of the optimizer.
    """

    def __init__(self, optimizer: Any) -> None:
        # weakly: no reference cycle, so a dropped optimizer's reducer goes at once on every
        # rank alike (a cycle would wait for the garbage collector, whose timing differs)
        self._optimizer = weakref.ref(optimizer)
        self.averaged = False
        self._key: tuple = ()
        self._watched: dict[int, Any] = {}
        self._reset()
        add_backward_observer(self)

    def _reset(self) -> None:
        self.buckets: list[Any] = []
        self.members: list[list[Any]] = []
        self.bucket_of: dict[int, int] = {}
        self.remaining: list[int] = []
        self.started: list[Any] = []
        self.next = 0
        self.running = False
        self.agreed = False  # the ranks agreed on the layout: every bucket must now be started

    @property
    def optimizer(self) -> Any:
        return self._optimizer()

    @property
    def watched(self) -> dict[int, Any]:
        """``id(param) -> param`` for every optimized parameter (rebuilt when the set changes)."""
        if self.optimizer is None:
            return {}
        groups = self.optimizer.param_groups
        key = tuple(id(p) for group in groups for p in group["params"])
        if key != self._key:
            self._watched = {id(p): p for group in groups for p in group["params"]}
            self._key = key
        return self._watched

    # ----- the observer protocol ----------------------------------------------------------------
    def backward_started(self, reached: dict[int, int]) -> None:
        """Plan the buckets, then start those nothing in this backward feeds."""
        self._reset()
        self.averaged = False
        # the layout is agreed with the other ranks just before the first bucket starts: with one
        # bucket that is right before its all-reduce, one rendezvous after the other (two apart
        # would each wait for the slower rank)
        self.buckets = self.optimizer.local_buckets()
        params = self.optimizer.params()
        for index, bucket in enumerate(self.buckets):
            members = [params[i] for i in bucket.positions]
            self.members.append(members)
            self.bucket_of.update((id(p), index) for p in members)
            self.remaining.append(sum(id(p) in reached for p in members))
        self.started = [None] * len(self.buckets)
        self.running = True
        self._start_ready()

    def leaf_ready(self, leaf: Any) -> None:
        index = self.bucket_of.get(id(leaf))
        if self.running and index is not None:
            self.remaining[index] -= 1
            self._start_ready()

    def node_done(self) -> None:
        # MPICH moves a non-blocking transfer only inside MPI calls: test what is in flight.
        for pending in self.started[: self.next]:
            if pending is not None and not isinstance(pending, Tensor):
                pending.test()

    def backward_finished(self) -> None:
        if not self.running:
            return
        self.remaining = [0] * len(self.buckets)
        self._start_ready()
        with no_grad():
            for members, started in zip(self.members, self.started):
                self.optimizer.unpack(members, self._result(started))
        self.running = False
        self.averaged = True

    def backward_failed(self) -> None:
        # Once the layout was agreed, start and finish every bucket anyway: the other ranks'
        # agreed all-reduces pair with these one to one. The gradients are left as they are
        # (the error propagates).
        if not (self.running and self.agreed):
            self.running = False
            return
        self.remaining = [0] * len(self.buckets)
        self._start_ready()
        for started in self.started:
            if started is not None and not isinstance(started, Tensor):
                started.wait()
        self.running = False

    # ----- starting and finishing buckets -------------------------------------------------------
    def _start_ready(self) -> None:
        while self.next < len(self.buckets) and self.remaining[self.next] <= 0:
            self._start(self.next)
            self.next += 1

    def _start(self, index: int) -> None:
        if not self.agreed:
            self.optimizer.agree_layout()  # a collective: raises before any all-reduce
            self.agreed = True
        with no_grad():
            flat = self.optimizer.pack(self.members[index])
            comm = self.optimizer.comm
            # the ranks agreed on the whole bucket layout in backward_started: no check each
            if tracing() is not None:  # traced: bucket_allreduce overlaps it in the plan
                with agreed_collectives(comm):
                    self.started[index] = ops.allreduce(flat, comm, "mean", bucket=index)
            else:
                array = get_array_module(flat.raw_array).ascontiguousarray(flat.raw_array)
                self.started[index] = comm.start_allreduce(array, "mean", bucket=index, agreed=True)

    @staticmethod
    def _result(started: Any) -> Tensor:
        if isinstance(started, Tensor):
            return started
        return Tensor.wrap(started.wait(), None, 0, False)

    def __repr__(self) -> str:
        return f"GradReducer({len(self.buckets)} buckets, averaged={self.averaged})"
