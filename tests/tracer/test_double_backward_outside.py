"""Double backward *through the outputs* of a compiled function (the backward re-runs the call
eagerly with its state writes undone): equal to eager, also with dropout and batch norm."""

from __future__ import annotations

import numpy as np

import dualflow
from dualflow import nn


def _penalty_grads(model_fn, x_array, params) -> tuple[float, list[np.ndarray]]:
    x = dualflow.tensor(x_array, requires_grad=True)
    for p in params:
        p.grad = None
    y = model_fn(x)
    (g,) = dualflow.grad((y * y).sum(), x, create_graph=True)
    penalty = (g * g).sum()
    penalty.backward()
    return penalty.item(), [p.grad.numpy().copy() for p in params]


def _model() -> nn.Module:
    dualflow.random.seed(7)
    return nn.Sequential(
        nn.Linear(3, 6), nn.BatchNorm1d(6), nn.Tanh(), nn.Dropout(0.3), nn.Linear(6, 2)
    ).to_device("cpu")


def test_gradient_penalty_through_a_compiled_model_equals_eager() -> None:
    rng = np.random.default_rng(0)
    batches = [rng.normal(size=(8, 3)) for _ in range(4)]
    results = []
    for compiled in (False, True):
        model = _model()
        for p in model.params():
            p.raw_array = p.raw_array.astype(np.float64)
        for _name, b in model.named_buffers():
            if b.dtype.kind == "f":
                b.raw_array = b.raw_array.astype(np.float64)
        params = list(model.params())
        fn = dualflow.compile(model) if compiled else model
        dualflow.random.seed(11)
        run = [_penalty_grads(fn, x, params) for x in batches]
        buffers = [b.numpy().copy() for _, b in model.named_buffers()]
        results.append((run, buffers, fn))
    (eager, eager_buffers, _), (comp, comp_buffers, fn) = results
    for (pe, ge), (pc, gc) in zip(eager, comp):
        np.testing.assert_allclose(pc, pe, rtol=1e-12)
        for a, b in zip(gc, ge):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    for a, b in zip(comp_buffers, eager_buffers):  # running stats updated once per call
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert fn.stats().plan_runs >= 2
