"""``Prefetcher``: run an iterator in a background thread, keeping up to ``depth`` items queued.

Used by ``DataLoader(prefetch=k)`` so that loading and collating the next batches overlaps with
the training step. Worker exceptions are re-raised in the consumer; ``close()`` stops the thread.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Any

_POLL_S = 0.05  # how often a blocked worker checks whether the consumer has gone away


class Prefetcher:
    """Iterate ``items`` in a daemon thread; iterate the Prefetcher to receive them in order.

    Args:
        items: the iterable to run in the worker (e.g. a lazy ``map`` that loads batches).
        depth: how many finished items may wait in the queue (>= 1).

    Example:
        >>> p = Prefetcher(map(lambda i: i * i, range(4)), depth=2)
        >>> list(p)
        [0, 1, 4, 9]
        >>> p.close()
    """

    def __init__(self, items: Iterable[Any], depth: int) -> None:
        if depth < 1:
            raise ValueError(f"Prefetcher: depth must be >= 1, got {depth}")
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._work, args=(items,), name="dualflow-prefetch", daemon=True
        )
        self._thread.start()

    def _work(self, items: Iterable[Any]) -> None:
        try:
            for item in items:
                if not self._put(("item", item)):
                    return
        except Exception as exc:  # handed to the consumer, which re-raises it
            self._put(("error", exc))
            return
        self._put(("end", None))

    def _put(self, entry: tuple[str, Any]) -> bool:
        # A bounded put with polling, so a worker blocked on a full queue notices close().
        while not self._stop.is_set():
            try:
                self._queue.put(entry, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> Iterator[Any]:
        while True:
            kind, payload = self._queue.get()
            if kind == "item":
                yield payload
            elif kind == "error":
                raise payload
            else:
                return

    @property
    def alive(self) -> bool:
        """Whether the worker thread is still running."""
        return self._thread.is_alive()

    def close(self) -> None:
        """Stop the worker (after the item it is loading, if any) and wait for it to exit."""
        self._stop.set()
        self._thread.join()
