"""Parity with PyTorch (skipped when torch is not installed; it is not a dependency).

Both sides get the same gradient sequence, so differences come from the update rules alone.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dualflow
from dualflow.nn import Parameter
from dualflow.optim import SGD, Adam, AdamW, RMSprop, clip_grad_norm, lr_scheduler

torch = pytest.importorskip("torch")

CONFIGS = [
    ("SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.2, "weight_decay": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
    ("Adam", {"lr": 0.01, "weight_decay": 0.1}),
    ("Adam", {"lr": 0.01, "betas": (0.8, 0.9), "amsgrad": True}),
    ("AdamW", {"lr": 0.01, "weight_decay": 0.3}),
    ("RMSprop", {"lr": 0.01, "weight_decay": 0.1}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.9, "centered": True}),
]
OURS = {"SGD": SGD, "Adam": Adam, "AdamW": AdamW, "RMSprop": RMSprop}


def run_both(name: str, config: dict, dtype: str, steps: int = 4) -> tuple:
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((3, 4)).astype(dtype)
    grads = [rng.standard_normal((3, 4)).astype(dtype) for _ in range(steps)]
    ours = Parameter(x0.copy())
    theirs = torch.nn.Parameter(torch.from_numpy(x0.copy()))
    opt = OURS[name]([ours], **config)
    torch_opt = getattr(torch.optim, name)([theirs], foreach=False, **config)
    for g in grads:
        ours.grad = dualflow.tensor(g)
        theirs.grad = torch.from_numpy(g.copy())
        opt.step()
        torch_opt.step()
    return ours, theirs, opt, torch_opt


@pytest.mark.parametrize(("name", "config"), CONFIGS, ids=lambda c: str(c))
def test_updates_match_torch(name: str, config: dict) -> None:
    ours, theirs, opt, torch_opt = run_both(name, config, "float64")
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-13, atol=1e-15)
    assert set(opt.state[ours]) == set(torch_opt.state[theirs])
    ours, theirs, *_ = run_both(name, config, "float32")
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
def test_clip_grad_norm_matches_torch(norm_type: float) -> None:
    rng = np.random.default_rng(1)
    grads = [rng.standard_normal(shape) for shape in ((3,), (2, 2))]
    ours = [Parameter(np.zeros_like(g)) for g in grads]
    theirs = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
    for p, t, g in zip(ours, theirs, grads):
        p.grad, t.grad = dualflow.tensor(g), torch.from_numpy(g.copy())
    total = clip_grad_norm(ours, 0.5, norm_type)
    expected = torch.nn.utils.clip_grad_norm_(theirs, 0.5, norm_type)
    assert total.item() == pytest.approx(expected.item(), rel=1e-14)
    for p, t in zip(ours, theirs):
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-14)


SCHEDULERS = [
    ("StepLR", {"step_size": 3, "gamma": 0.3}),
    ("CosineAnnealingLR", {"T_max": 7, "eta_min": 0.01}),
    ("LinearLR", {"start_factor": 0.2, "end_factor": 0.9, "total_iters": 4}),
]


@pytest.mark.parametrize(("name", "kwargs"), SCHEDULERS, ids=lambda c: str(c))
def test_scheduler_lrs_match_torch(name: str, kwargs: dict) -> None:
    opt = SGD([Parameter(np.zeros(1))], lr=0.5)
    torch_opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.5)
    ours = getattr(lr_scheduler, name)(opt, **kwargs)
    theirs = getattr(torch.optim.lr_scheduler, name)(torch_opt, **kwargs)
    for _ in range(10):
        assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-12, abs=1e-15)
        opt.step()
        torch_opt.step()
        ours.step()
        theirs.step()
