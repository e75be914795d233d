"""State a user's code creates inside a compiled step with public ops (a custom optimizer's
buffer made with ``ops.zeros_like`` and updated with ``ops.assign``) keeps evolving at every
call, as eagerly (issue 13, hole 13)."""

from __future__ import annotations

import numpy as np

import dualflow
from dualflow import nn, ops, optim


class HeavyBall(optim.Optimizer):
    """A user's momentum optimizer written the obvious way."""

    def __init__(self, params, lr=0.1, beta=0.9):
        super().__init__(params, {"lr": lr, "beta": beta})

    def _update(self, p, grad, state, group, lr):
        if "buf" not in state:
            state["buf"] = ops.zeros_like(p)
        buf = state["buf"]
        ops.assign(buf, buf * group["beta"] + grad)
        ops.assign(p, p - ops.cast(lr, p.dtype) * buf)


def _losses(mode: str, x: dualflow.Tensor) -> list[float]:
    dualflow.random.seed(0)
    model = nn.Linear(2, 1)
    opt = HeavyBall(list(model.params()), lr=0.05)

    def step(x):
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    run = dualflow.compile(step) if mode == "compiled" else step
    losses = [run(x).item() for _ in range(6)]
    if mode == "compiled":
        assert run.stats().plan_runs >= 3
    return losses


def test_a_custom_optimizer_buffer_made_with_ops_keeps_updating() -> None:
    x = dualflow.tensor(np.array([[1.0, 2.0], [0.5, -1.0]], np.float32))
    assert _losses("compiled", x) == _losses("eager", x)


def test_defaults_of_the_step_are_guarded_like_globals() -> None:
    import types

    cfg = types.SimpleNamespace(scale=2.0)

    def step(x, cfg=cfg):
        return x * cfg.scale

    compiled = dualflow.compile(step)
    x = dualflow.tensor([1.0])
    assert compiled(x).item() == 2.0 and compiled(x).item() == 2.0
    cfg.scale = 3.0
    assert compiled(x).item() == 3.0
