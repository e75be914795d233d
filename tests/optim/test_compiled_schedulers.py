"""Schedulers driving a compiled training step: the same parameters as eagerly, and no retrace
from any scheduler step (lr and cycled momentum are tensors read by reference)."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import nn, ops, optim
from dualflow.optim import lr_scheduler as S

SCHEDULERS = {
    "step": lambda o: S.StepLR(o, 2, 0.5),
    "multistep": lambda o: S.MultiStepLR(o, [1, 3], 0.3),
    "exponential": lambda o: S.ExponentialLR(o, 0.8),
    "lambda": lambda o: S.LambdaLR(o, lambda e: 1 / (1 + e)),
    "warm_restarts": lambda o: S.CosineAnnealingWarmRestarts(o, 2, 2),
    "one_cycle": lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=8),
    "linear_warmup": lambda o: S.LinearLR(o, 0.1, total_iters=3),
    "sequential": lambda o: S.SequentialLR(o, [S.ConstantLR(o, 0.5, 2), S.PolynomialLR(o, 4)], [2]),
    "chained": lambda o: S.ChainedScheduler([S.ConstantLR(o, 0.5, 3), S.ExponentialLR(o, 0.9)]),
    "plateau": lambda o: S.ReduceLROnPlateau(o, patience=0, factor=0.5),
}
X = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)


def run(name: str, optimizer: str, compiled: bool):
    dualflow.random.seed(0)
    model = nn.Linear(3, 1)
    if optimizer == "sgd":
        opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    else:
        opt = optim.Adam(model.parameters(), lr=0.1)
    sched = SCHEDULERS[name](opt)

    def step(x):
        opt.zero_grad()
        loss = ops.sum(model(x) ** 2)
        loss.backward()
        opt.step()
        return loss

    fn = dualflow.compile(step) if compiled else step
    x, losses, traces = dualflow.tensor(X), [], []
    for _ in range(8):
        losses.append(fn(x).item())
        sched.step(
            -losses[-1] if name == "plateau" else None
        ) if name == "plateau" else sched.step()
        traces.append(fn.stats().traces if compiled else 0)
    return losses, [p.numpy().copy() for p in model.parameters()], traces


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_scheduled_compiled_step_equals_eager_without_retrace(name: str, optimizer: str) -> None:
    eager_losses, eager_params, _ = run(name, optimizer, compiled=False)
    losses, params, traces = run(name, optimizer, compiled=True)
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5)
    for a, b in zip(params, eager_params):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    assert traces[-1] == traces[1], traces  # nothing after the first two calls retraced
