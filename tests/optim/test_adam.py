"""Adam, AdamW and AMSGrad against the published formulas, computed step by step with numpy."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow.nn import Parameter
from dualflow.optim import Adam, AdamW
from tests.optim.problems import reference, train


def adam_update(
    x,
    g,
    state,
    t,
    lr,
    betas=(0.9, 0.999),
    eps=1e-8,
    weight_decay=0.0,
    amsgrad=False,
    decoupled=False,
):
    """Adam as written by Kingma & Ba (bias-corrected moments), with PyTorch's eps placement."""
    beta1, beta2 = betas
    if decoupled:
        x = x * (1 - lr * weight_decay)
    else:
        g = g + weight_decay * x
    m = state["m"] = beta1 * state.get("m", 0.0) + (1 - beta1) * g
    v = state["v"] = beta2 * state.get("v", 0.0) + (1 - beta2) * g * g
    if amsgrad:
        v = state["vmax"] = np.maximum(state.get("vmax", 0.0), v)
    m_hat = m / (1 - beta1**t)
    return x - lr * m_hat / (np.sqrt(v) / np.sqrt(1 - beta2**t) + eps)


ADAM_CONFIGS = [
    {"lr": 0.1},
    {"lr": 0.05, "betas": (0.8, 0.9), "eps": 1e-3},
    {"lr": 0.1, "weight_decay": 0.1},
    {"lr": 0.1, "amsgrad": True, "betas": (0.5, 0.6)},
]


@pytest.mark.parametrize("config", ADAM_CONFIGS, ids=str)
def test_adam_matches_reference_float64(config) -> None:
    p, _, _ = train(lambda ps: Adam(ps, **config), steps=3)
    np.testing.assert_allclose(p.numpy(), reference(adam_update, 3, **config), rtol=1e-12)


@pytest.mark.parametrize("config", [{"lr": 0.1}, {"lr": 0.1, "weight_decay": 0.5, "amsgrad": True}])
def test_adamw_matches_reference_float64(config) -> None:
    p, _, _ = train(lambda ps: AdamW(ps, **config), steps=3)
    expected = reference(adam_update, 3, decoupled=True, **{"weight_decay": 1e-2, **config})
    np.testing.assert_allclose(p.numpy(), expected, rtol=1e-12)


def test_adamw_decay_differs_from_adam_l2() -> None:
    adam, _, _ = train(lambda ps: Adam(ps, lr=0.1, weight_decay=0.5), steps=3)
    adamw, _, _ = train(lambda ps: AdamW(ps, lr=0.1, weight_decay=0.5), steps=3)
    assert not np.allclose(adam.numpy(), adamw.numpy())


@pytest.mark.parametrize("cls", [Adam, AdamW])
def test_adam_float32_stays_float32(cls) -> None:
    config = {"lr": 0.1, "weight_decay": 0.1, "amsgrad": True}
    p, opt, _ = train(lambda ps: cls(ps, **config), steps=3, dtype="float32")
    assert p.dtype == np.float32
    assert {t.dtype for k, t in opt.state[p].items() if k != "step"} == {np.dtype(np.float32)}
    expected = reference(adam_update, 3, decoupled=cls is AdamW, **config)
    np.testing.assert_allclose(p.numpy(), expected, rtol=2e-6)


def test_adam_state_dtypes_and_step_count() -> None:
    p = Parameter(np.ones(3, np.float32))
    opt = Adam([p], lr=0.1, amsgrad=True)
    for _ in range(3):
        p.grad = p * 2
        opt.step()
    state = opt.state[p]
    assert sorted(state) == ["exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"]
    assert state["step"].shape == () and state["step"].dtype == np.float64
    assert state["step"].item() == 3.0
    assert {state[k].dtype for k in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")} == {
        np.dtype(np.float32)
    }


def test_adam_first_step_is_lr_times_sign() -> None:
    # With zero moments, the first bias-corrected step is lr * g / (|g| + eps') = lr * sign(g).
    p = Parameter(np.array([1.0, 1.0, 1.0]))
    opt = Adam([p], lr=0.25, eps=0.0)
    p.grad = dualflow.tensor(np.array([3.0, -0.5, 100.0]))
    opt.step()
    np.testing.assert_allclose(p.numpy(), [0.75, 1.25, 0.75], rtol=1e-15)


def test_adam_rejects_bad_betas() -> None:
    with pytest.raises(ValueError, match=r"betas\[1\]"):
        Adam([Parameter(np.zeros(1))], betas=(0.9, 1.0))
