"""LR schedulers: lr sequences against hand-computed values, lr tensor writes, state dicts."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dualflow
from dualflow.nn import Parameter
from dualflow.optim import SGD
from dualflow.optim.lr_scheduler import CosineAnnealingLR, LinearLR, LinearWarmup, StepLR


def sequence(scheduler, epochs: int) -> list[list[float]]:
    lrs = [scheduler.get_last_lr()]
    for _ in range(epochs - 1):
        scheduler.optimizer.step()
        scheduler.step()
        lrs.append(scheduler.get_last_lr())
    return lrs


def two_group_sgd(dtype: str = "float64") -> SGD:
    a, b = Parameter(np.zeros(1, dtype)), Parameter(np.zeros(1, dtype))
    return SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=1.0)


def test_step_lr() -> None:
    lrs = sequence(StepLR(two_group_sgd(), step_size=2, gamma=0.5), 6)
    expected = [[1.0 * 0.5 ** (e // 2), 0.5 * 0.5 ** (e // 2)] for e in range(6)]
    assert lrs == expected


def test_step_lr_takes_a_whole_float_step_size_as_pytorch() -> None:
    # PyTorch's transformer tutorial: StepLR(optimizer, 1.0, gamma=0.95)
    assert sequence(StepLR(two_group_sgd(), 1.0, gamma=0.5), 3) == sequence(
        StepLR(two_group_sgd(), 1, gamma=0.5), 3
    )
    with pytest.raises(ValueError, match=r"step_size must be a positive integer, got 1\.5"):
        StepLR(two_group_sgd(), 1.5)


def test_cosine_annealing() -> None:
    lrs = sequence(CosineAnnealingLR(two_group_sgd(), T_max=4, eta_min=0.1), 5)
    cos = [(1 + math.cos(math.pi * e / 4)) / 2 for e in range(5)]
    assert lrs == [[0.1 + 0.9 * c, 0.1 + 0.4 * c] for c in cos]
    assert lrs[-1] == [0.1, 0.1]


def test_linear_lr_and_warmup() -> None:
    lrs = sequence(LinearLR(two_group_sgd(), start_factor=0.25, total_iters=3), 5)
    factors = [0.25, 0.5, 0.75, 1.0, 1.0]
    assert lrs == [[f, 0.5 * f] for f in factors]
    warm = sequence(LinearWarmup(two_group_sgd(), warmup_steps=4, start_factor=0.0), 6)
    assert [lr[0] for lr in warm] == [0.0, 0.25, 0.5, 0.75, 1.0, 1.0]


def test_scheduler_writes_the_same_lr_tensors() -> None:
    opt = two_group_sgd("float32")
    tensors = [g["lr"] for g in opt.param_groups]
    scheduler = StepLR(opt, step_size=1, gamma=0.1)
    scheduler.step()
    assert all(g["lr"] is t for g, t in zip(opt.param_groups, tensors))
    assert tensors[0].dtype == np.float32 and tensors[0].item() == np.float32(0.1)


def test_scheduler_lr_changes_the_next_update() -> None:
    p = Parameter(np.zeros(1))
    opt = SGD([p], lr=1.0)
    scheduler = StepLR(opt, step_size=1, gamma=0.5)
    deltas = []
    for _ in range(3):
        before = p.item()
        p.grad = dualflow.tensor(np.ones(1))
        opt.step()
        scheduler.step()
        deltas.append(before - p.item())
    assert deltas == [1.0, 0.5, 0.25]


def test_initial_lr_is_recorded_and_a_user_lr_is_respected() -> None:
    opt = two_group_sgd()
    opt.param_groups[0]["lr"] = 2.0  # a float set before the scheduler exists
    scheduler = StepLR(opt, step_size=1, gamma=0.5)
    assert opt.param_groups[0]["initial_lr"] == 2.0
    scheduler.step()
    assert scheduler.get_last_lr() == [1.0, 0.25]


def test_scheduler_state_dict_round_trip() -> None:
    first = CosineAnnealingLR(two_group_sgd(), T_max=10)
    for _ in range(3):
        first.step()
    saved = first.state_dict()
    opt = two_group_sgd()
    second = CosineAnnealingLR(opt, T_max=10)
    second.load_state_dict(saved)
    first.step()
    second.step()
    assert second.last_epoch == 4 and second.get_last_lr() == first.get_last_lr()
    assert opt.lr_tensor(0).item() == first.get_last_lr()[0]
    with pytest.raises(ValueError, match="unknown"):
        second.load_state_dict({"bogus": 1})


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="step_size"):
        StepLR(two_group_sgd(), step_size=0)
    with pytest.raises(ValueError, match="T_max"):
        CosineAnnealingLR(two_group_sgd(), T_max=0)
    with pytest.raises(KeyError, match="initial_lr"):
        StepLR(two_group_sgd(), step_size=1, last_epoch=3)
