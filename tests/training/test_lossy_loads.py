"""Loading a checkpoint never changes a value silently (issue 19): float64 1e300 used to become
inf in a float32 parameter and a fractional ``num_batches_tracked`` was truncated. Such loads
are refused with a CheckpointError naming the entry, and nothing is written."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import nn, optim
from dualflow.errors import CheckpointError
from dualflow.training.checkpoint import capture, load_checkpoint, restore, save_checkpoint


def _model() -> nn.Sequential:
    return nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))


def test_a_float64_value_that_overflows_float32_is_refused(tmp_path) -> None:
    model = _model()
    state = {k: v.numpy().astype(np.float64) for k, v in model.state_dict().items()}
    state["0.weight"][1, 0] = 1e300
    before = model[0].weight.numpy().copy()
    with pytest.raises(CheckpointError, match=r"0.weight: the saved float64 value 1e\+300 would "):
        model.load_state_dict(state)
    np.testing.assert_array_equal(model[0].weight.numpy(), before)
    state["0.weight"][1, 0] = 0.1  # an ordinary float64 value rounds to float32 and loads
    model.load_state_dict(state)
    assert model[0].weight.dtype == np.float32


def test_a_fractional_batch_count_is_refused_in_a_training_checkpoint(tmp_path) -> None:
    model, path = _model(), str(tmp_path / "ckpt.npz")
    opt = optim.SGD(model.parameters(), lr=0.1)
    saved = capture(model, opt)
    saved["model"]["1.num_batches_tracked"] = np.array(2.7)
    save_checkpoint(saved, path)
    with pytest.raises(CheckpointError) as info:
        restore(load_checkpoint(path), model, opt)
    assert "1.num_batches_tracked: the saved float64 value 2.7 would become 2" in str(info.value)
    assert model[1].num_batches_tracked.item() == 0


def test_optimizer_state_that_overflows_is_refused() -> None:
    p = nn.Parameter(np.ones(2, np.float32))
    adam = optim.Adam([p])
    p.grad = dualflow.tensor(np.ones(2, np.float32))
    adam.step()
    saved = adam.state_dict()
    saved["state"][0]["exp_avg_sq"] = np.array([1e300, 1.0])
    with pytest.raises(CheckpointError, match=r"Adam.load_state_dict: state 'exp_avg_sq'"):
        adam.load_state_dict(saved)
    assert adam.state[p]["exp_avg_sq"].numpy().max() < 1.0  # unchanged
