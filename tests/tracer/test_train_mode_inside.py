"""``model.train()`` inside a compiled step and ``model.eval()`` between steps (issue 40).

The mode writes are replayed by every plan run, and submodules whose flag the call set before
anything read it do not make the next call retrace.
"""

from __future__ import annotations

import numpy as np

import dualflow
from dualflow import nn, optim


def _run(compiled: bool) -> tuple[list, object]:
    dualflow.random.seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.BatchNorm1d(8), nn.Linear(8, 1))
    opt = optim.SGD(model.parameters(), lr=0.1)

    def step(x):
        model.train()
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    run = dualflow.compile(step) if compiled else step
    x = dualflow.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    trail = []
    for _ in range(5):
        trail.append(run(x).item())
        trail.append([m.training for m in model.modules()])  # train() took effect
        model.eval()
        trail.append(model(x).sum().item())
    return trail, run


def test_train_inside_and_eval_outside_match_eager_without_retracing() -> None:
    want, _ = _run(False)
    got, compiled = _run(True)
    assert got == want
    assert compiled.stats().traces == 1 and compiled.stats().plan_runs == 4


def test_a_flag_read_before_train_still_guards() -> None:
    model = nn.Sequential(nn.Linear(2, 2))

    @dualflow.compile
    def step(x):
        was = model.training  # the trace depends on the flag before the call
        model.train()
        y = model(x) * (2.0 if was else 3.0)
        model.train(was)
        return y

    x = dualflow.tensor(np.ones((1, 2), np.float32))
    for mode in (True, False, True, False):
        model.train(mode)
        expect = model(x) * (2.0 if mode else 3.0)
        assert step(x).tolist() == expect.tolist()
        assert model.training is mode
