"""RMSprop (plain, centered, momentum, weight decay) against the formulas, step by step."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow.nn import Parameter
from dualflow.optim import RMSprop
from tests.optim.problems import reference, train


def rmsprop_update(
    x, g, state, t, lr, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False
):
    """torch.optim.RMSprop's documented algorithm."""
    g = g + weight_decay * x
    s = state["s"] = alpha * state.get("s", 0.0) + (1 - alpha) * g * g
    if centered:
        a = state["a"] = alpha * state.get("a", 0.0) + (1 - alpha) * g
        avg = np.sqrt(s - a * a) + eps
    else:
        avg = np.sqrt(s) + eps
    if momentum > 0:
        buf = state["buf"] = momentum * state.get("buf", 0.0) + g / avg
        return x - lr * buf
    return x - lr * g / avg


CONFIGS = [
    {"lr": 0.01},
    {"lr": 0.01, "alpha": 0.9, "eps": 1e-4},
    {"lr": 0.01, "centered": True},
    {"lr": 0.01, "momentum": 0.9},
    {"lr": 0.01, "momentum": 0.5, "centered": True, "weight_decay": 0.1},
]


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_rmsprop_matches_reference_float64(config) -> None:
    p, _, _ = train(lambda ps: RMSprop(ps, **config), steps=3)
    np.testing.assert_allclose(p.numpy(), reference(rmsprop_update, 3, **config), rtol=1e-12)


@pytest.mark.parametrize("config", [CONFIGS[0], CONFIGS[4]], ids=str)
def test_rmsprop_float32_stays_float32(config) -> None:
    p, opt, _ = train(lambda ps: RMSprop(ps, **config), steps=3, dtype="float32")
    assert p.dtype == np.float32
    assert {t.dtype for k, t in opt.state[p].items() if k != "step"} == {np.dtype(np.float32)}
    np.testing.assert_allclose(p.numpy(), reference(rmsprop_update, 3, **config), rtol=2e-6)


def test_rmsprop_state_by_options() -> None:
    p = Parameter(np.ones(2, np.float32))
    opt = RMSprop([p], momentum=0.9, centered=True)
    p.grad = dualflow.tensor([1.0, 2.0])
    opt.step()
    state = opt.state[p]
    assert sorted(state) == ["grad_avg", "momentum_buffer", "square_avg", "step"]
    assert state["square_avg"].dtype == np.float32
    # s = 0.01 g^2, a = 0.01 g, avg = sqrt(s - a^2) + eps = sqrt(0.0099) |g| + eps
    expected = np.array([1.0, 2.0]) ** 2 * 0.01
    np.testing.assert_allclose(state["square_avg"].numpy(), expected, rtol=1e-6)


def test_rmsprop_rejects_negative_alpha() -> None:
    with pytest.raises(ValueError, match="alpha"):
        RMSprop([Parameter(np.zeros(1))], alpha=-0.5)
