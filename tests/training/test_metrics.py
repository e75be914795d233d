"""``accuracy``, ``count_correct`` and ``evaluate`` on hand-made cases with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dualflow
from dualflow import nn, ops
from dualflow.training import EpochMeter, accuracy, count_correct, evaluate


def test_accuracy_of_known_predictions() -> None:
    logits = dualflow.tensor([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [1.0, 0.0, 5.0], [9.0, 0.0, 0.0]])
    assert accuracy(logits, dualflow.tensor([0, 1, 1, 2])) == 0.5
    assert accuracy(logits.numpy(), np.array([0, 1, 2, 0])) == 1.0
    assert count_correct(logits, [2, 2, 2, 2]) == 1


def test_accuracy_rejects_what_is_not_a_classification() -> None:
    with pytest.raises(ValueError, match="integer labels"):
        accuracy([[0.1, 0.9]], [0.5])
    with pytest.raises(ValueError):
        accuracy([0.1, 0.9], [1, 0])
    assert count_correct([[0.1, 0.9]], [1, 0]) is None  # 1 row, 2 labels


def _identity_classifier() -> nn.Module:
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.9))
    with dualflow.no_grad():
        ops.assign(model[0].weight, np.eye(2, dtype=np.float32))
        ops.assign(model[0].bias, 0.0)
    return model


def test_evaluate_gives_the_hand_computed_loss_and_accuracy() -> None:
    model = _identity_classifier()
    x = dualflow.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    y = dualflow.tensor([0, 1, 1])
    # Two batches of different sizes: the loss must be a per-sample mean, not a mean of batches.
    loader = [(x[:2], y[:2]), (x[2:], y[2:])]
    result = evaluate(model, loader, ops.softmax_cross_entropy)
    good, bad = math.log(1 + math.exp(-1)), math.log(1 + math.exp(1))
    assert result.loss == pytest.approx((2 * good + bad) / 3, rel=1e-6)
    assert result.accuracy == pytest.approx(2 / 3)
    loss, acc = result  # unpacks like a tuple
    assert loss == result.loss
    assert acc == result.accuracy


def test_evaluate_uses_eval_mode_and_restores_each_modules_mode() -> None:
    model = nn.Sequential(nn.Linear(2, 4), nn.BatchNorm1d(4), nn.Dropout(0.5), nn.Linear(4, 2))
    model[1].eval()  # a frozen submodule must stay frozen afterwards
    batch = (
        dualflow.tensor(np.random.default_rng(0).normal(size=(8, 2)), dtype="float32"),
        dualflow.tensor([0] * 8),
    )
    before = model[1].running_mean.numpy().copy()
    first = evaluate(model, [batch], ops.softmax_cross_entropy)
    assert evaluate(model, [batch], ops.softmax_cross_entropy) == first  # dropout was off
    assert np.array_equal(model[1].running_mean.numpy(), before)
    assert [m.training for m in model.modules()] == [True, True, False, True, True]
    assert dualflow.is_grad_enabled()


def test_evaluate_of_nothing() -> None:
    result = evaluate(nn.Linear(2, 2), [], ops.softmax_cross_entropy)
    assert math.isnan(result.loss) and result.accuracy is None


def test_epoch_meter_round_trips_its_state() -> None:
    meter = EpochMeter()
    meter.update(0.5, 3, 4)
    copy = EpochMeter()
    copy.load_state_dict(meter.state_dict())
    meter.update(0.25, 1, 2)
    copy.update(0.25, 1, 2)
    assert (
        copy.summary() == meter.summary() == {"loss": (0.5 * 4 + 0.25 * 2) / 6, "accuracy": 4 / 6}
    )
