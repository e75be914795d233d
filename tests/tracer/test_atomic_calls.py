"""A compiled call leaves all old or all new state: a failed first call rolls back optimizer state
born in it, an error during a plan run commits nothing (donated updates included), an interrupt
lands after the commit, and a swallowed TracingError still invalidates the trace (issue 13,
holes 6, 7 and 8)."""

from __future__ import annotations

import signal

import numpy as np
import pytest

import dualflow
from dualflow import nn, ops, optim
from dualflow.errors import ShapeError
from dualflow.ops import host_print


def _setup(optimizer: str = "adam"):
    dualflow.random.seed(0)
    model = nn.Sequential(nn.Linear(3, 8), nn.BatchNorm1d(8), nn.Dropout(0.3), nn.Linear(8, 3))
    params = list(model.params())
    opt = optim.Adam(params, lr=0.1) if optimizer == "adam" else optim.SGD(params, 0.1, 0.9)

    def step(x, t, fail=False):
        opt.zero_grad()
        loss = ops.softmax_cross_entropy(model(x), t)
        loss.backward()
        opt.step()
        if fail:
            raise ValueError("bad batch")
        return loss

    return model, opt, step


def _snapshot(model, opt) -> list[np.ndarray]:
    arrays = [t.numpy().copy() for _, t in (*model.named_params(), *model.named_buffers())]
    arrays += [p.grad.numpy().copy() for p in model.params() if p.grad is not None]
    arrays += [t.numpy().copy() for s in opt.state.values() for _, t in sorted(s.items())]
    arrays.append(dualflow.random.get_state().copy() if hasattr(dualflow.random, "get_state")
                  else np.zeros(0))  # fmt: skip
    return arrays + [np.array(len(opt.state))]


X = dualflow.tensor(np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32))
T = dualflow.tensor(np.array([0, 1, 2, 0, 1, 2]))


def test_a_failed_first_call_rolls_back_state_born_in_it() -> None:
    eager_model, eager_opt, eager = _setup()  # dropout draws from the global generator:
    eager_losses = [eager(X, T).item() for _ in range(3)]  # run each mode on its own
    eager_state = _snapshot(eager_model, eager_opt)
    model, opt, step = _setup()
    compiled = dualflow.compile(step)
    with pytest.raises(ValueError, match="bad batch"):
        compiled(X, T, True)
    assert not opt.state  # Adam's moments and step count, born in the call, are gone
    assert [compiled(X, T).item() for _ in range(3)] == eager_losses
    for a, b in zip(_snapshot(model, opt), eager_state):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_an_error_during_a_plan_run_commits_nothing(optimizer: str) -> None:
    model, opt, step = _setup(optimizer)
    compiled = dualflow.compile(step)
    for _ in range(3):
        compiled(X, T)
    assert compiled.stats().plan_runs >= 1
    before = _snapshot(model, opt)
    rng_before = [t.numpy().copy() for t in _rng_tensors()]
    bad = dualflow.tensor(np.array([0, 1, 2, 0, 1, 7]))  # label 7 of 3 classes
    with pytest.raises(ShapeError, match="softmax_cross_entropy"):
        compiled(X, bad)
    for a, b in zip(_snapshot(model, opt), before):
        np.testing.assert_array_equal(a, b)
    for a, b in zip((t.numpy() for t in _rng_tensors()), rng_before):
        np.testing.assert_array_equal(a, b)


def _rng_tensors() -> list:
    from dualflow.tensor.random import _defaults

    return [t for g in _defaults.values() for t in vars(g).values() if hasattr(t, "numpy")]


def test_an_interrupt_during_a_plan_run_lands_after_the_commit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    eager_model, eager_opt, eager = _setup("sgd")
    for _ in range(3):  # the interrupted call below commits as a whole: a third step
        eager(X, T)
    eager_state = _snapshot(eager_model, eager_opt)
    model, opt, step = _setup("sgd")

    def marked(x, t):
        dualflow.debug.print("step")  # the interrupt arrives while this step runs
        return step(x, t)

    compiled = dualflow.compile(marked)
    for _ in range(2):
        compiled(X, T)
    monkeypatch.setattr(host_print, "_emit", lambda text: signal.raise_signal(signal.SIGINT))
    with pytest.raises(KeyboardInterrupt):
        compiled(X, T)
    for a, b in zip(_snapshot(model, opt), eager_state):
        np.testing.assert_array_equal(a, b)


def test_a_swallowed_tracing_error_still_invalidates_the_trace() -> None:
    def step(x):
        try:
            scale = float(np.asarray(x).sum())
        except Exception:
            scale = 0.0
        return x * scale

    compiled = dualflow.compile(step)
    with pytest.warns(RuntimeWarning, match="fail closed"):
        compiled(dualflow.tensor([1.0, 2.0]))
    for v in ([3.0, 4.0], [1.0, 1.0]):
        assert compiled(dualflow.tensor(v)).tolist() == step(dualflow.tensor(v)).tolist()
    strict = dualflow.compile(step, fallback="error")
    with pytest.raises(dualflow.errors.TracingError, match=r"reading \.array"):
        strict(dualflow.tensor([1.0, 2.0]))
