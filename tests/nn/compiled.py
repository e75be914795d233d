"""Shared driver of the compiled-vs-eager layer tests: the same training steps run eagerly and
under ``@dualflow.compile`` from identical models, RNG and data."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import dualflow
from dualflow import ops


def train(build: Callable[[], Any], inputs: list, compiled: bool, steps: int = 3) -> tuple:
    """Losses, final state (parameters and buffers) and the compiled function (or None)."""
    dualflow.random.seed(0)
    model = build()
    dualflow.random.seed(1)  # the same dropout masks in both runs
    opt = dualflow.optim.SGD(model.parameters(), lr=0.05, momentum=0.5)

    def step(*xs):
        opt.zero_grad()
        out = model(*xs)
        outs = out if isinstance(out, tuple) else (out,)
        loss = sum(ops.sum(o * o) for o in _tensors(outs))
        loss.backward()
        opt.step()
        return loss

    fn = dualflow.compile(step) if compiled else step
    losses = [fn(*inputs).item() for _ in range(steps)]
    state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    return losses, state, (fn if compiled else None)


def _tensors(values: Any) -> list:
    found = []
    for v in values:
        if isinstance(v, tuple):
            found += _tensors(v)
        elif v is not None:
            found.append(v)
    return found


def assert_compiled_equals_eager(build: Callable[[], Any], inputs: list, rtol: float = 2e-5):
    """Run both; compare losses and final state; the compiled one must have run as plans."""
    eager_losses, eager_state, _ = train(build, inputs, compiled=False)
    losses, state, fn = train(build, inputs, compiled=True)
    np.testing.assert_allclose(losses, eager_losses, rtol=rtol, atol=1e-6)
    assert list(state) == list(eager_state)
    for name, value in eager_state.items():
        np.testing.assert_allclose(state[name], value, rtol=rtol, atol=1e-6, err_msg=name)
    stats = fn.stats()
    assert stats.eager_fallbacks == 0 and stats.plan_runs >= 1, stats
    return fn
