"""Backward observers: be told when a watched leaf's gradient is final, while backward still runs.

An observer (the multi-node optimizer's gradient reducer, like PyTorch DDP's hooks) watches some
leaf tensors. When ``backward()`` starts on a graph reaching any of them, the engine counts, per
watched leaf, the edges that will deliver gradient to it; each time a node's backward has run, the
counts of its leaves drop, and a leaf reaching zero is final: ``leaf_ready(leaf)``.
``node_done()`` after every node lets the observer make progress on work in flight.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any, Protocol


class BackwardObserver(Protocol):
    """What the engine calls; ``watched`` maps ``id(leaf)`` to anything."""

    watched: dict[int, Any]

    def backward_started(self, reached: dict[int, int]) -> None: ...
    def leaf_ready(self, leaf: Any) -> None: ...
    def node_done(self) -> None: ...
    def backward_finished(self) -> None: ...
    def backward_failed(self) -> None: ...


_OBSERVERS: list[weakref.ref] = []
_lock = threading.Lock()


def add_backward_observer(observer: Any) -> None:
    """Have ``observer`` told about every later ``backward()`` reaching its watched leaves.

    Held weakly: dropping the observer unregisters it.

    Example:
        >>> class Nothing:
        ...     watched = {}
        >>> add_backward_observer(Nothing())
    """
    with _lock:
        _OBSERVERS[:] = [ref for ref in _OBSERVERS if ref() is not None]
        _OBSERVERS.append(weakref.ref(observer))


class Observation:
    """The observers of one backward run and, per watched leaf reached, its pending edges."""

    def __init__(self, pending: dict[int, list]) -> None:
        self.pending = pending  # id(leaf) -> [edges left, leaf, observers watching it]
        self.observers: list[Any] = []
        for _, _, watchers in pending.values():
            self.observers.extend(o for o in watchers if o not in self.observers)

    def start(self) -> None:
        for observer in self.observers:
            reached = {k: v[0] for k, v in self.pending.items() if observer in v[2]}
            observer.backward_started(reached)

    def after(self, edges: Sequence[Any]) -> None:
        """A node whose input edges are ``edges`` finished its backward."""
        pending = self.pending
        for edge in edges:
            if edge is not None and type(edge) is not tuple:
                entry = pending.get(id(edge))
                if entry is not None:
                    entry[0] -= 1
                    if entry[0] == 0:
                        for observer in entry[2]:
                            observer.leaf_ready(entry[1])
        for observer in self.observers:
            observer.node_done()

    def finish(self) -> None:
        """Backward is over: leaves still pending (their edges got no gradient) are final too."""
        for entry in self.pending.values():
            if entry[0] > 0:
                entry[0] = 0
                for observer in entry[2]:
                    observer.leaf_ready(entry[1])
        for observer in self.observers:
            observer.backward_finished()

    def fail(self) -> None:
        for observer in self.observers:
            observer.backward_failed()


def start_observing(outputs: Sequence[Any]) -> Observation | None:
    """The observation of a backward from ``outputs``, or None when no observer watches it."""
    observers = [o for o in (ref() for ref in list(_OBSERVERS)) if o is not None and o.watched]
    if not observers:
        return None
    counts: dict[int, list] = {}
    seen: set[int] = set()
    ignored: set[int] = set()  # leaves nobody watches
    stack = [t.creator for t in outputs if t.creator is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen or node.edges is None:
            continue
        seen.add(id(node))
        for edge in node.edges:
            if edge is None:
                continue
            if type(edge) is tuple:
                stack.append(edge[0])
                continue
            entry = counts.get(id(edge))
            if entry is None:
                watchers = [o for o in observers if id(edge) in o.watched]
                if not watchers or id(edge) in ignored:
                    ignored.add(id(edge))
                    continue
                entry = counts[id(edge)] = [0, edge, watchers]
            entry[0] += 1
    if not counts:
        return None
    observation = Observation(counts)
    observation.start()
    return observation
