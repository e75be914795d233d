"""``PendingAllreduce``: a started all-reduce, finished (under the watchdog) by ``wait()``."""

from __future__ import annotations

from typing import Any

from dualflow.distributed.agreement import Position


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
