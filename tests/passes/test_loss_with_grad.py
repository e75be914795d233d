"""loss_with_grad: a softmax cross entropy and its gradient from the same logits become one
``softmax_cross_entropy_and_grad`` where the gradient's ``gy`` is made before the loss; compiled
training steps keep eager's bits (every reduction, ignored labels), and a bad label still raises
the loss's own error."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dualflow as df
from dualflow import nn, ops
from dualflow.errors import ShapeError
from dualflow.graph_ir import GraphBuilder
from dualflow.graph_ir.ir import Node
from dualflow.passes.loss_with_grad import loss_with_grad

ATTRS = {"ignore_label": -1, "reduce": "mean"}


def _pair(gy_after: bool = False, attrs: dict | None = None, recompute: bool = False):
    b = GraphBuilder("f")
    x, t = b.input((4, 3), "float32"), b.input((4,), "int64")
    seed = b.input((), "float32")
    if not gy_after:  # made before the loss
        (gy,) = b.node("multiply", [seed, 2.0])
    (loss,) = b.node("softmax_cross_entropy", [x, t], ATTRS)
    if gy_after:
        (gy,) = b.node("multiply", [loss, 0.0])
    (gx,) = b.node("softmax_cross_entropy_grad", [x, t, gy], attrs or ATTRS)
    b.output(loss, gx)
    graph = b.build()
    if recompute:
        nodes = [Node(n.op, n.inputs, n.outputs, n.attrs, n.loc, n.op == "softmax_cross_entropy")
                 for n in graph.nodes]  # fmt: skip
        graph = graph.replace(nodes=tuple(nodes))
    return graph


def test_the_pair_becomes_one_node_at_the_loss_s_place() -> None:
    graph = _pair()
    after = loss_with_grad(graph)
    assert [n.op for n in after.nodes] == ["multiply", "softmax_cross_entropy_and_grad"]
    merged = after.nodes[1]
    assert merged.outputs == (graph.nodes[1].outputs[0], graph.nodes[2].outputs[0])
    assert merged.inputs == graph.nodes[2].inputs and merged.attrs == ATTRS


def test_gy_s_own_steps_move_before_the_loss() -> None:
    b = GraphBuilder("f")
    x, t = b.input((4, 3), "float32"), b.input((4,), "int64")
    seed = b.input((), "float32")
    (loss,) = b.node("softmax_cross_entropy", [x, t], ATTRS)
    (other,) = b.node("exp", [x])  # after the loss, not gy's: it stays there
    (gy,) = b.node("multiply", [seed, 2.0])
    (gx,) = b.node("softmax_cross_entropy_grad", [x, t, gy], ATTRS)
    b.output(loss, gx, other)
    after = loss_with_grad(b.build())
    assert [n.op for n in after.nodes] == ["multiply", "softmax_cross_entropy_and_grad", "exp"]


def _grad_first():
    b = GraphBuilder("f")
    x, t = b.input((4, 3), "float32"), b.input((4,), "int64")
    (gx,) = b.node("softmax_cross_entropy_grad", [x, t, 1.0], ATTRS)
    (used,) = b.node("exp", [gx])  # read before the loss runs
    (loss,) = b.node("softmax_cross_entropy", [x, t], ATTRS)
    b.output(loss, used)
    return b.build()


@pytest.mark.parametrize(
    "graph",
    [
        _grad_first(),  # the gradient comes first: its readers may precede the loss
        _pair(gy_after=True),  # gy is made from the loss: it cannot move before it
        _pair(attrs={"ignore_label": 0, "reduce": "mean"}),  # another loss's gradient
        _pair(recompute=True),  # a checkpoint's re-run keeps its place
    ],
)
def test_pairs_it_cannot_merge_are_left_as_they_are(graph) -> None:
    assert loss_with_grad(graph) is graph


def _step(reduce: str, passes: str | None, seed: int):
    rng = np.random.default_rng(seed)
    x = df.tensor(rng.standard_normal((16, 20), np.float32))
    labels = df.tensor(rng.integers(-1, 7, 16))
    df.random.seed(0)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 7))
    opt = df.optim.SGD(model.parameters(), lr=0.1)

    def step():
        opt.zero_grad()
        loss = ops.softmax_cross_entropy(model(x), labels, reduce=reduce)
        (loss.sum() * 0.5 if reduce == "no" else loss).backward()
        opt.step()
        return loss

    fn = df.compile(step, passes=passes) if passes else step
    losses = [fn().numpy().copy() for _ in range(3)]
    return losses, [p.numpy().copy() for p in model.parameters()], fn


@settings(max_examples=8, deadline=None)
@given(
    reduce=st.sampled_from(["mean", "sum", "no"]),
    passes=st.sampled_from(["O2", "exact"]),
    seed=st.integers(0, 2**16),
)
def test_training_steps_keep_eager_s_bits(reduce: str, passes: str, seed: int) -> None:
    eager = _step(reduce, None, seed)
    compiled = _step(reduce, passes, seed)
    for a, b in zip(eager[0] + eager[1], compiled[0] + compiled[1], strict=True):
        assert a.tobytes() == b.tobytes()
    (trace,) = [t for ts in compiled[2].traces.values() for t in ts]
    ops_run = [n.op for n in trace.plan.graph.nodes]
    assert "softmax_cross_entropy_and_grad" in ops_run
    assert "softmax_cross_entropy_grad" not in ops_run


def test_a_bad_label_raises_the_loss_s_error() -> None:
    w = df.tensor(np.ones((3, 4), np.float32), requires_grad=True)

    def step(x, t):
        loss = ops.softmax_cross_entropy(x @ w, t)
        loss.backward()
        return loss

    fn = df.compile(step)
    x = df.tensor(np.ones((2, 3), np.float32))
    fn(x, df.tensor(np.array([0, 3])))
    before = w.grad.numpy().copy()
    with pytest.raises(ShapeError, match=r"softmax_cross_entropy: labels must lie in \[0, 4\)"):
        fn(x, df.tensor(np.array([0, 4])))
    assert np.array_equal(w.grad.numpy(), before)  # nothing written
