"""Restoring another optimizer's state is refused at the restore (issue 19): Adam after an SGD
checkpoint used to accept the restore and fail at the first step with ``KeyError: 'step'``."""

from __future__ import annotations

import os

import numpy as np
import pytest

import dualflow
from dualflow import nn, optim
from dualflow.errors import CheckpointError
from dualflow.training.checkpoint import capture, load_checkpoint, restore, save_checkpoint

HERE = os.path.abspath(__file__)


def _trained_sgd_checkpoint(path: str) -> nn.Linear:
    model = nn.Linear(3, 2)
    sgd = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(dualflow.tensor(np.ones((4, 3), np.float32))).sum().backward()
    sgd.step()  # momentum buffers exist
    save_checkpoint(capture(model, sgd, loop={"step": 1}), path)
    return model


def _resume(path: str, model: nn.Module, optimizer: optim.Optimizer) -> None:
    restore(load_checkpoint(path), model, optimizer)


def test_adam_refuses_an_sgd_training_checkpoint_naming_both_classes(tmp_path) -> None:
    path = str(tmp_path / "ckpt.npz")
    model = _trained_sgd_checkpoint(path)
    adam = optim.Adam(model.parameters(), lr=1e-3)
    weight = model.weight.numpy().copy()
    with pytest.raises(CheckpointError) as info:
        _resume(path, model, adam)
    message = str(info.value)
    assert message.startswith("Adam.load_state_dict: the saved state is SGD's, not Adam's"), message
    assert "has ['dampening', 'momentum', 'nesterov'] hyperparameters" in message
    assert "lacks ['amsgrad', 'betas', 'eps'] of Adam's" in message
    assert message.endswith(f"at {HERE}:{_resume.__code__.co_firstlineno + 1}"), message
    np.testing.assert_array_equal(model.weight.numpy(), weight)  # all or nothing
    assert adam.state == {}
    model(dualflow.tensor(np.ones((1, 3), np.float32))).sum().backward()
    adam.step()  # still a working, fresh Adam


def test_a_pytorch_style_dict_of_the_same_optimizer_still_loads() -> None:
    model = nn.Linear(2, 2)
    adam = optim.Adam(model.parameters())
    saved = adam.state_dict()
    for group in saved["param_groups"]:  # keys PyTorch adds that dualflow does not keep
        group.update(foreach=None, capturable=False, differentiable=False, fused=None)
        group["initial_lr"] = 1e-3  # a scheduler's bookkeeping
    adam.load_state_dict(saved)
    with pytest.raises(CheckpointError, match="saved state is Adam or AdamW's, not SGD's"):
        optim.SGD(model.parameters(), lr=0.1).load_state_dict(saved)
