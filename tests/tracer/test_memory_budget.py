"""``compile(memory_budget=...)``: training steps give eager's bits (dropout masks included) at
every budget with a lower planned peak; compiled checkpoints lower it too; explain reports what
was recomputed; the budget is checked and is part of the plan-cache key."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualflow
from dualflow import nn, ops, optim
from dualflow.errors import ConfigError
from dualflow.passes.remat import planned_peak, report_of
from dualflow.passes.remat_cost import node_cost
from dualflow.passes.remat_search import merge
from dualflow.tracer.plan_cache import cache_key
from dualflow.tracer.signature import flatten
from dualflow.utils.checkpoint import checkpoint_sequential


def _mlp() -> nn.Module:
    return nn.Sequential(
        nn.Linear(16, 64), nn.Tanh(), nn.Dropout(0.2), nn.Linear(64, 64), nn.ReLU(),
        nn.Linear(64, 4),
    )  # fmt: skip


def _cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Dropout(0.2),
        nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(8 * 4 * 4, 4),
    )  # fmt: skip


def _build(model, shape: tuple, ckpt: int = 0):
    rng = np.random.default_rng(0)
    dualflow.manual_seed(0)  # same weights and the same dropout masks in every run
    net = model()
    x = dualflow.tensor(rng.standard_normal(shape).astype(np.float32))
    y = dualflow.tensor(rng.integers(0, 4, shape[0]))
    opt = optim.SGD(list(net.params()), lr=0.05)

    def step():
        opt.zero_grad()
        out = checkpoint_sequential(net, ckpt, x) if ckpt else net(x)
        loss = ops.softmax_cross_entropy(out, y)
        loss.backward()
        opt.step()
        return loss

    return step, net


def _run(model, shape, compiled: dict | None, steps: int = 3, ckpt: int = 0):
    step, net = _build(model, shape, ckpt)
    fn = step if compiled is None else dualflow.compile(step, **compiled)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a budget below what remat can reach
        losses = [fn().item() for _ in range(steps)]
    peak = fn.history[-1].plan.predicted_peak if compiled is not None else None
    return losses, [p.numpy().copy() for p in net.params()], peak, fn


def _same(a, b) -> None:
    assert a[0] == b[0]
    for p, q in zip(a[1], b[1]):
        np.testing.assert_array_equal(p, q)


@pytest.mark.parametrize(
    "model,shape", [(_mlp, (256, 16)), (_cnn, (8, 3, 8, 8))], ids=["mlp", "cnn-bn-dropout"]
)
def test_budgets_keep_eager_bits_and_lower_the_planned_peak(model, shape) -> None:
    eager = _run(model, shape, None)
    exact = _run(model, shape, {"passes": "exact"})
    default = _run(model, shape, {})
    _same(exact, eager)
    peaks = {}
    for budget in (1.0, 0.5, 0.2):
        _same(_run(model, shape, {"passes": "exact", "memory_budget": budget}), eager)
        remat = _run(model, shape, {"memory_budget": budget})
        _same(remat, default)  # O2 with the budget: O2's bits
        peaks[budget] = remat[2]
        report = report_of(remat[3].history[-1].graph)
        assert report.before == default[2] and report.after == remat[2]
    assert peaks[1.0] == default[2]
    assert peaks[0.2] <= peaks[0.5] < default[2]


def test_compiled_checkpoints_predict_a_lower_peak_with_eager_bits() -> None:
    def deep() -> nn.Module:
        layers = []
        for _ in range(6):
            layers += [nn.Linear(32, 32), nn.Tanh(), nn.Dropout(0.1)]
        return nn.Sequential(*layers, nn.Linear(32, 4))

    plain = _run(deep, (512, 32), {})
    checked = _run(deep, (512, 32), {}, ckpt=4)
    _same(checked, plain)
    _same(_run(deep, (512, 32), None, ckpt=4), _run(deep, (512, 32), None))
    assert checked[2] < 0.8 * plain[2]
    text = str(dualflow.explain(checked[3]))
    assert "recompute nodes (checkpoints" in text and "recompute fused" in text


def test_no_copy_of_a_budgeted_step_can_go_within_its_peak() -> None:
    _, _, peak, fn = _run(_cnn, (8, 3, 8, 8), {"memory_budget": 0.5}, steps=1)
    graph = fn.history[-1].graph
    report = report_of(graph)
    values = {v.id: v for n in graph.nodes for v in n.outputs}
    values.update((v.id, v) for v in (*graph.inputs, *graph.state))
    origins = {values[c]: values.get(s, s) for c, s in report.sources.items()}  # s: int if gone
    assert report.after == peak and len(report.recomputed) >= 2
    for copy in report.recomputed:  # each copy is one that the planned peak needs
        merged = merge(graph, copy.outputs[0], origins)
        if merged is not None and node_cost(copy) > 0:
            assert planned_peak(merged) > max(report.target, report.after)


def test_explain_reports_the_recomputation() -> None:
    _, _, _, fn = _run(_cnn, (8, 3, 8, 8), {"memory_budget": 0.5}, steps=2)
    text = str(dualflow.explain(fn))
    assert "memory_budget=0.5" in text and "values recomputed" in text
    assert "extra FLOPs" in text and "recompute batch_norm" in text
    assert "pass remat=0.5:" in text


def test_budget_is_checked_at_the_decorator_and_keys_the_plan_cache() -> None:
    for bad in (0, 2.0, "1GB", True):
        with pytest.raises(ConfigError, match="memory_budget"):
            dualflow.compile(memory_budget=bad)
        with pytest.raises(ConfigError, match="memory_budget"):
            dualflow.compile(lambda x: x, memory_budget=bad)

    def f(x):
        return x * 2

    flat = flatten((dualflow.ones(2),), {}, ["x"])
    keys = {
        cache_key(f, flat, (), dualflow.compile(f, memory_budget=b).passes)
        for b in (None, 0.5, 0.25, 1 << 20)
    }
    assert len(keys) == 4
    assert dualflow.compile(f, memory_budget=0.5).passes[-1] == "remat=0.5"


def test_a_compiled_forward_with_its_own_backward_graph_takes_the_budget_too() -> None:
    def grads(compiled: dict | None):
        dualflow.manual_seed(0)
        net = _mlp()
        x = dualflow.tensor(np.random.default_rng(1).standard_normal((256, 16)), dtype="float32")

        def forward(x):
            return ops.softmax_cross_entropy(net(x), dualflow.zeros(256, dtype="int64"))

        fn = forward if compiled is None else dualflow.compile(forward, **compiled)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            for _ in range(2):
                net.zero_grad()
                fn(x).backward()
        return [p.grad.numpy().copy() for p in net.params()]

    for got, want in zip(grads({"passes": "exact", "memory_budget": 0.3}), grads(None)):
        np.testing.assert_array_equal(got, want)


def test_plans_stored_with_a_budget_load_only_with_that_budget(tmp_path) -> None:
    def make(budget):
        step, net = _build(_cnn, (8, 3, 8, 8))
        return dualflow.compile(step, memory_budget=budget, cache_dir=tmp_path), net

    def run(fn) -> list[float]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return [fn().item() for _ in range(2)]

    first, _ = make(0.5)
    want = run(first)
    assert first.stats().cache_stores >= 1
    again, _ = make(0.5)
    assert run(again) == want and again.stats().cache_loads >= 1
    loaded = again.history[0].graph
    assert any(n.recompute for n in loaded.nodes)  # the mark survives the plan cache
    assert "recompute" in str(dualflow.explain(again))
    other, _ = make(0.25)
    run(other)
    assert other.stats().cache_loads == 0  # another budget is another plan
