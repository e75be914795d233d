"""SGD against PyTorch's published update, computed step by step with numpy."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow.nn import Parameter
from dualflow.optim import SGD
from tests.optim.problems import reference, train

CONFIGS = [
    {"lr": 0.1},
    {"lr": 0.1, "momentum": 0.9},
    {"lr": 0.05, "momentum": 0.8, "dampening": 0.3},
    {"lr": 0.1, "momentum": 0.9, "nesterov": True},
    {"lr": 0.1, "momentum": 0.5, "weight_decay": 0.2},
    {"lr": 0.1, "weight_decay": 0.3},
]


def sgd_update(x, g, state, t, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """torch.optim.SGD's documented algorithm."""
    g = g + weight_decay * x
    if momentum:
        if t == 1:
            state["buf"] = g.copy()
        else:
            state["buf"] = momentum * state["buf"] + (1 - dampening) * g
        g = g + momentum * state["buf"] if nesterov else state["buf"]
    return x - lr * g


@pytest.mark.parametrize(
    "config", CONFIGS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items())
)
def test_sgd_matches_reference_float64(config) -> None:
    p, _, _ = train(lambda ps: SGD(ps, **config), steps=3)
    np.testing.assert_allclose(p.numpy(), reference(sgd_update, 3, **config), rtol=1e-12)


@pytest.mark.parametrize("config", CONFIGS[:4])
def test_sgd_float32_stays_float32(config) -> None:
    p, _, _ = train(lambda ps: SGD(ps, **config), steps=3, dtype="float32")
    assert p.dtype == np.float32
    np.testing.assert_allclose(p.numpy(), reference(sgd_update, 3, **config), rtol=2e-6)


def test_sgd_momentum_by_hand() -> None:
    # grads 1, 1, 1 with momentum 0.5, dampening 0.5: buf = 1, 0.5 + 0.5 = 1, 1; steps of lr * buf
    p = Parameter(np.array([0.0]))
    opt = SGD([p], lr=0.5, momentum=0.5, dampening=0.5)
    for _ in range(3):
        p.grad = dualflow.tensor(np.array([1.0]))
        opt.step()
    assert p.tolist() == [-1.5]
    assert opt.state[p]["momentum_buffer"].tolist() == [1.0]


def test_sgd_without_momentum_keeps_no_state() -> None:
    _, opt, _ = train(lambda ps: SGD(ps, lr=0.1, weight_decay=0.1), steps=2)
    assert opt.state_dict()["state"] == {}


def test_sgd_rejects_bad_hyperparameters() -> None:
    p = Parameter(np.zeros(2))
    with pytest.raises(ValueError, match="Nesterov"):
        SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="learning rate"):
        SGD([p], lr=-1.0)
    with pytest.raises(ValueError, match="momentum"):
        SGD([p], lr=0.1, momentum=-0.1)
