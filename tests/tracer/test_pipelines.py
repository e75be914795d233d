"""Compiled training steps equal eager ones with every pass pipeline and every single pass on
(DESIGN §5): the passes may change the graph, never the results."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import ops
from dualflow.nn import Parameter
from dualflow.passes import manager
from tests.tracer.test_training_steps import (
    OPTIMIZERS,
    _batches,
    _cnn,
    _optimizer_state,
    run_both,
)

PIPELINES = ["O0", "O1", "O2", "fold", "cse", "dce", "fuse"]


def _wide_mlp_batches(dtype: Any) -> list:
    return _batches(dtype, (96, 4), 3)


def _mlp(dtype: Any, make_opt: Any) -> tuple[Any, Any]:
    # 96 x 64 activations: large enough for the fuse pass's cost model to fuse regions
    rng = np.random.default_rng(0)
    shapes = [(64, 4), (64,), (3, 64), (3,)]
    params = [Parameter((rng.normal(size=s) * 0.5).astype(dtype)) for s in shapes]
    opt = make_opt(params)
    w1, b1, w2, b2 = params

    def step(x: Any, t: Any) -> Any:
        opt.zero_grad()
        h = ops.tanh(ops.linear(x, w1, b1)) * 0.5 + ops.relu(ops.linear(x, w1, b1))
        loss = ops.softmax_cross_entropy(ops.linear(h, w2, b2), t)
        loss.backward()
        opt.step()
        return loss.detach()

    return step, lambda: [p.raw_array.copy() for p in params] + _optimizer_state(opt)


@pytest.mark.parametrize("passes", PIPELINES)
def test_mlp_adam_step_equals_eager(passes: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUALFLOW_PASSES", passes)
    dtype = np.float32
    fn = run_both(lambda: _mlp(dtype, OPTIMIZERS["adam"]), _wide_mlp_batches(dtype), dtype)
    assert fn.passes == dualflow.passes.resolve_passes(passes)
    assert fn.stats().plan_runs >= 3


@pytest.mark.parametrize("passes", PIPELINES)
def test_cnn_step_with_batch_norm_and_dropout_equals_eager(
    passes: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DUALFLOW_PASSES", passes)
    dtype = np.float64
    batches = _batches(dtype, (4, 2, 8, 8), 4)
    fn = run_both(lambda: _cnn(dtype), batches, dtype, seed=3)
    assert fn.stats().plan_runs >= 3


def test_default_pipeline_fuses_and_shrinks_the_graph() -> None:
    dtype = np.float32
    step, _ = _mlp(dtype, OPTIMIZERS["sgd"])
    fn = dualflow.compile(step)
    for x, t in _wide_mlp_batches(dtype)[:2]:
        fn(dualflow.tensor(x), dualflow.tensor(t))
    trace = fn.history[-1]
    names = [s.name for s in trace.pass_stats]
    assert names == list(manager.O2)
    assert trace.pass_stats[-1].nodes_after < trace.pass_stats[0].nodes_before
    assert any(node.op == "fused" for node in trace.graph.nodes)
    assert "pass fuse:" in str(dualflow.explain(fn))
