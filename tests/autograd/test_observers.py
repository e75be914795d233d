"""Backward observers (``dualflow.autograd.observers``): each watched leaf is reported once per
backward, as soon as its gradient is final and while the rest of backward still runs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import ops
from dualflow.autograd.observers import add_backward_observer
from dualflow.errors import ShapeError


class Recorder:
    def __init__(self, leaves: list[Any]) -> None:
        self.watched = {id(t): t for t in leaves}
        self.events: list[Any] = []

    def backward_started(self, reached: dict[int, int]) -> None:
        self.events.append(("started", sorted(reached.values())))

    def leaf_ready(self, leaf: Any) -> None:
        self.events.append(("ready", leaf.name, None if leaf.grad is None else leaf.grad.tolist()))

    def node_done(self) -> None:
        self.events.append("node")

    def backward_finished(self) -> None:
        self.events.append("finished")

    def backward_failed(self) -> None:
        self.events.append("failed")


def _leaf(value: list[float], name: str) -> Any:
    t = dualflow.tensor(value, requires_grad=True)
    t.name = name
    return t


def test_leaves_are_ready_in_backward_order_once_their_gradient_is_final() -> None:
    w1, w2 = _leaf([2.0], "w1"), _leaf([3.0], "w2")
    x = dualflow.tensor([1.0])
    h = x * w1
    y = (h * w2 + h * w2).sum()  # w2 is used twice: ready only after both uses
    recorder = Recorder([w1, w2])
    add_backward_observer(recorder)
    y.backward()
    events = recorder.events
    assert events[0] == ("started", [1, 2])  # w1 reached by one edge, w2 by two
    ready = [e for e in events if e[0] == "ready"]
    assert ready == [("ready", "w2", [4.0]), ("ready", "w1", [6.0])]
    w2_at = events.index(ready[0])
    assert "node" in events[w2_at + 1 :]  # backward goes on after w2 is final
    assert events[-1] == "finished" and "failed" not in events


def test_unwatched_graphs_and_create_graph_are_not_observed() -> None:
    w = _leaf([2.0], "w")
    recorder = Recorder([w])
    add_backward_observer(recorder)
    other = _leaf([1.0], "other")
    (other * 3.0).sum().backward()
    assert recorder.events == []
    (g,) = dualflow.grad((w * w).sum(), w, create_graph=True)
    ops.sum(g).backward(create_graph=True)  # double backward: the plain reducer path
    assert recorder.events == []
    np.testing.assert_array_equal(w.grad.numpy(), [2.0])


def test_a_failing_backward_tells_the_observer() -> None:
    w = _leaf([2.0], "w")
    recorder = Recorder([w])
    add_backward_observer(recorder)
    with pytest.raises(ShapeError, match="gy has shape"):
        (w * w).backward(dualflow.tensor([1.0, 2.0]))  # a gradient of the wrong shape
    assert recorder.events == [("started", [2]), "failed"]
