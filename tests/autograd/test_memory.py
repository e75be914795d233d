"""Memory behaviour of the tape: only declared saves are kept, backward releases them, no cycles."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import numpy as np
import pytest

import dualflow
from dualflow import ops
from dualflow.tensor.core import Tensor
from dualflow.tensor.tape import Node


@pytest.fixture
def no_gc() -> Iterator[None]:
    """Disable the cyclic collector so that only reference counting frees objects."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _chain(x: Tensor) -> tuple[Tensor, list[weakref.ref], list[Node]]:
    """tanh -> *2 -> exp -> *x -> sum; returns the loss, weakrefs to the arrays, the nodes."""
    refs, nodes = [], []
    h = ops.tanh(x)  # saves y
    refs.append(weakref.ref(h.array))
    nodes.append(h.creator)
    h = h * 2  # saves both inputs (the tanh output and the scalar)
    nodes.append(h.creator)
    h = ops.exp(h)  # saves y
    refs.append(weakref.ref(h.array))
    nodes.append(h.creator)
    h = h * x  # saves the exp output
    nodes.append(h.creator)
    return h.sum(), refs, nodes


def test_intermediates_are_released_by_backward(no_gc: None) -> None:
    x = dualflow.tensor(np.linspace(-1, 1, 7), requires_grad=True)
    loss, refs, nodes = _chain(x)
    assert all(r() is not None for r in refs), "saved arrays must live until backward"
    loss.backward()
    for node in nodes:
        assert node.saved_inputs is None and node.saved_outputs is None, node
        assert node.released
    dead = [r() is None for r in refs]
    assert all(dead), f"saved intermediate arrays still alive after backward: {dead}"
    assert x.grad is not None


def test_retain_graph_keeps_the_saved_arrays(no_gc: None) -> None:
    x = dualflow.tensor(np.linspace(-1, 1, 7), requires_grad=True)
    loss, refs, nodes = _chain(x)
    loss.backward(retain_graph=True)
    assert all(r() is not None for r in refs)
    assert not any(n.released for n in nodes)
    loss.backward()
    assert all(r() is None for r in refs)


def test_grad_releases_the_graph_too(no_gc: None) -> None:
    x = dualflow.tensor(np.linspace(-1, 1, 7), requires_grad=True)
    loss, refs, _ = _chain(x)
    dualflow.grad(loss, x)
    assert all(r() is None for r in refs)


def test_unsaved_intermediate_is_not_kept_by_the_tape(no_gc: None) -> None:
    x = dualflow.tensor(np.ones(5), requires_grad=True)
    a = x + 1  # add saves nothing; exp saves only its output
    ref = weakref.ref(a.array)
    y = ops.exp(a)
    del a
    assert ref() is None, "the tape keeps an input that no backward reads"
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp(2.0) * np.ones(5))


def test_saved_intermediate_is_kept_until_backward(no_gc: None) -> None:
    x = dualflow.tensor(np.ones(5), requires_grad=True)
    a = ops.exp(x)
    ref = weakref.ref(a.array)
    y = a * x  # multiply saves both inputs
    del a
    assert ref() is not None
    y.sum().backward()
    del y
    assert ref() is None


def test_no_grad_keeps_nothing(no_gc: None) -> None:
    x = dualflow.tensor(np.ones(5), requires_grad=True)
    with dualflow.no_grad():
        a = ops.tanh(x)
        ref = weakref.ref(a.array)
        y = ops.exp(a) * a
        del a
    assert ref() is None
    assert y.creator is None


def _mlp_params(rng: np.random.Generator) -> list[Tensor]:
    return [
        dualflow.tensor(rng.standard_normal((3, 4)) * 0.5, requires_grad=True),
        dualflow.tensor(np.zeros(4), requires_grad=True),
        dualflow.tensor(rng.standard_normal((4, 1)) * 0.5, requires_grad=True),
    ]


def _gradient_penalty_step(params: list[Tensor], data: np.ndarray) -> None:
    w1, b1, w2 = params
    x = dualflow.tensor(data, requires_grad=True)
    loss = ops.matmul(ops.tanh(ops.matmul(x, w1) + b1), w2).sum()
    (g,) = dualflow.grad(loss, x, create_graph=True)
    pen = (g * g).sum()
    pen.backward()


def test_double_backward_creates_no_reference_cycles() -> None:
    rng = np.random.default_rng(0)
    params = _mlp_params(rng)
    data = rng.standard_normal((5, 3))
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(100):
            _gradient_penalty_step(params, data)
        collected = gc.collect()
        ours = [o for o in gc.garbage if isinstance(o, Tensor | Node)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()
    assert not ours, f"{len(ours)} dualflow objects were only reachable through cycles"
    assert collected == 0, f"gc found {collected} objects in reference cycles"


def test_the_cycle_check_can_fail() -> None:
    # Sanity check of the method above: a deliberate Tensor cycle is seen by the collector.
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        t = dualflow.tensor([1.0])
        t.name = t  # type: ignore[assignment]
        del t
        gc.collect()
        ours = [o for o in gc.garbage if isinstance(o, Tensor)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()
    assert len(ours) == 1
