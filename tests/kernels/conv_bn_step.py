"""A conv/BN/ReLU training step compiled and eager, for the batch-norm kernels' tests."""

from __future__ import annotations

import numpy as np

import dualflow
from dualflow import nn, ops


def _build(dtype: str) -> tuple:
    dualflow.random.seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
    model = model.to(dtype)
    opt = dualflow.optim.SGD(model.parameters(), lr=0.1)
    x = dualflow.tensor(np.random.default_rng(1).standard_normal((4, 3, 8, 8)), dtype=dtype)

    def step() -> object:
        opt.zero_grad()
        loss = ops.mean(model(x) ** 2)
        loss.backward()
        opt.step()
        return loss

    return model, step


def assert_compiled_equals_eager(dtype: str) -> None:
    """Three steps eager and compiled from the same start: the same losses and parameters, bit
    for bit."""
    eager_model, eager_step = _build(dtype)
    compiled_model, compiled_step = _build(dtype)
    compiled_step = dualflow.compile(compiled_step)
    for _ in range(3):
        assert eager_step().item() == compiled_step().item()
    for a, b in zip(eager_model.state_dict().values(), compiled_model.state_dict().values()):
        assert np.array_equal(np.asarray(a), np.asarray(b))
