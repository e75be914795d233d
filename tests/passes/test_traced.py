"""The passes on real traced graphs: a compiled MLP training step (forward, backward, SGD with
momentum) gives the same outputs and state updates after every pipeline."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import ops, optim
from dualflow.graph_ir import verify
from dualflow.nn import Parameter
from dualflow.passes import run_passes
from tests.passes.programs import assert_same_run


@pytest.fixture(scope="module")
def traced():
    rng = np.random.default_rng(0)
    shapes = [(8, 4), (8,), (3, 8), (3,)]
    params = [Parameter((rng.normal(size=s) * 0.5).astype(np.float32)) for s in shapes]
    opt = optim.SGD(params, lr=0.1, momentum=0.9)
    w1, b1, w2, b2 = params

    def step(x, t):
        opt.zero_grad()
        h = ops.relu(ops.linear(x, w1, b1))
        loss = ops.softmax_cross_entropy(ops.linear(h, w2, b2), t)
        loss.backward()
        opt.step()
        return loss.detach()

    fn = dualflow.compile(step, fallback="error", passes="O0")  # the raw traced graph
    for _ in range(3):
        x = rng.normal(size=(6, 4)).astype(np.float32)
        fn(dualflow.tensor(x), dualflow.tensor(rng.integers(0, 3, size=6)))
    trace = fn.history[-1]
    inputs = [x, rng.integers(0, 3, size=6)]
    return trace.graph, inputs, [np.array(r.read(), copy=True) for r in trace.checks.refs]


@pytest.mark.parametrize("passes", ["O0", "O1", "O2", ("fold",), ("cse",), ("dce",)])
def test_traced_mlp_step(traced, passes) -> None:
    graph, inputs, state = traced
    verify(graph)
    out, stats = run_passes(graph, passes, verify_each=True)
    assert len(out) <= len(graph)
    assert_same_run(graph, out, inputs, state)
    if passes == "O2":
        assert stats[-1].nodes_after < stats[0].nodes_before


def test_gradients_of_a_sum_need_no_seed_at_run_time() -> None:
    """``dualflow.grad`` of a sum: the seed ``ones_like(loss)`` folds, so the loss is dead and
    its broadcast is read as a (1, 1) constant; the gradients are eager's, bit for bit."""
    rng = np.random.default_rng(2)
    x = dualflow.tensor(rng.normal(size=(16, 16)).astype(np.float32), requires_grad=True)
    w = dualflow.tensor(rng.normal(size=(16, 16)).astype(np.float32), requires_grad=True)

    def step():
        y = x
        for _ in range(4):
            y = ops.sigmoid(ops.tanh(y * 0.9 + 0.1) * w)
        return dualflow.grad(y.sum(), [x, w])

    compiled = dualflow.compile(step, fallback="error")
    for _ in range(3):
        got, want = compiled(), step()
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    ops_run = [node.op for node in compiled.history[-1].plan.graph.nodes]
    assert not {"full_like", "broadcast_to", "sum"} & set(ops_run), ops_run
