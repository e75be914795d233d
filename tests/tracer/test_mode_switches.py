"""Switching train/eval and changing the learning rate between compiled calls: no stale graphs,
and no retrace storms (evaluating every epoch must not exhaust max_traces)."""

from __future__ import annotations

import warnings

import numpy as np

import dualflow
from dualflow import nn, ops, optim


def _model_and_step(lr: float = 0.1) -> tuple:
    dualflow.random.seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5), nn.Linear(4, 2))
    opt = optim.SGD(list(model.params()), lr=lr)

    def step(x, y):
        opt.zero_grad()
        loss = ops.mean_squared_error(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return model, opt, step


def test_eval_between_epochs_reuses_the_training_trace() -> None:
    model, _, step = _model_and_step()
    compiled = dualflow.compile(step, max_traces=3)
    x, y = dualflow.tensor(np.ones((2, 3), np.float32)), dualflow.tensor(np.zeros((2, 2)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a max_traces fallback would warn
        for _ in range(10):  # ten "epochs", each followed by an evaluation
            compiled(x, y)
            compiled(x, y)
            model.eval()
            with dualflow.no_grad():
                model(x)
            model.train()
    stats = compiled.stats()
    assert stats.traces == 1 and stats.plan_runs == 19 and stats.eager_fallbacks == 0


def test_eval_mode_call_of_a_compiled_model_retraces_with_dropout_off() -> None:
    model, _, _ = _model_and_step()
    compiled = dualflow.compile(lambda x: model(x))
    x = dualflow.tensor(np.ones((4, 3), np.float32))
    with dualflow.no_grad():
        compiled(x)
        model.eval()
        first, second = compiled(x), compiled(x)
    assert np.array_equal(first.numpy(), second.numpy())  # dropout is off: deterministic
    assert compiled.stats().retrace_reasons[-1] == "Sequential.training: True -> False"


def test_assigning_a_number_to_lr_changes_the_next_compiled_update_without_retracing() -> None:
    model, opt, step = _model_and_step(lr=0.0)
    compiled = dualflow.compile(step)
    x, y = dualflow.tensor(np.ones((2, 3), np.float32)), dualflow.tensor(np.zeros((2, 2)))
    for _ in range(3):
        compiled(x, y)
    before = [p.numpy().copy() for p in model.params()]
    compiled(x, y)  # lr 0: nothing moves
    assert all(np.array_equal(a, p.numpy()) for a, p in zip(before, model.params()))
    opt.param_groups[0]["lr"] = 0.5
    compiled(x, y)
    assert any(not np.array_equal(a, p.numpy()) for a, p in zip(before, model.params()))
    assert compiled.stats().traces == 1 and float(opt.param_groups[0]["lr"]) == 0.5
