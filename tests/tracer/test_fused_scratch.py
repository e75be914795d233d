"""A compiled step whose fused region reads one value twice gives eager's result on every call
(the blocked evaluator once handed one scratch buffer to two live values)."""

from __future__ import annotations

import numpy as np

import dualflow
from dualflow import nn, ops, optim


def test_value_read_twice_in_a_transcendental_region() -> None:
    x = dualflow.tensor(np.linspace(-3, 3, 8192, dtype=np.float32))

    def f(x):
        s = ops.sin(x)
        h = ops.tanh(x)
        return (s + s) * ops.cos(x) + h * h * 2.0

    compiled = dualflow.compile(f)
    for _ in range(3):
        np.testing.assert_array_equal(compiled(x).numpy(), f(x).numpy())


def test_mean_of_squares_training_step_matches_eager() -> None:
    """A user's step: tanh layer, a loss whose gradient reads values twice, SGD."""

    def make():
        dualflow.random.seed(0)
        model = nn.Sequential(nn.Linear(64, 128), nn.Tanh())
        return model, optim.SGD(list(model.params()), lr=0.1)

    x = dualflow.tensor(np.random.default_rng(0).normal(size=(64, 64)).astype(np.float32))
    losses = {}
    for mode in ("eager", "compiled"):
        model, opt = make()

        def step(x, model=model, opt=opt):
            opt.zero_grad()
            h = model(x)
            s = ops.sin(h)
            loss = (s * s + ops.exp(h) * h).mean()
            loss.backward()
            opt.step()
            return loss

        run = dualflow.compile(step) if mode == "compiled" else step
        losses[mode] = [run(x).item() for _ in range(4)]
        losses[mode + "-weight"] = model[0].weight.numpy().copy()
    np.testing.assert_allclose(losses["compiled"], losses["eager"], rtol=1e-6)
    np.testing.assert_allclose(
        losses["compiled-weight"], losses["eager-weight"], rtol=1e-6, atol=1e-7
    )
