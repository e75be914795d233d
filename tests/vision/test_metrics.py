"""Top-k accuracy, confusion matrix, per-class accuracy and evaluate() on hand-made cases."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import nn, ops
from dualflow.training import accuracy
from dualflow.vision import metrics

LOGITS = np.array(
    [
        [0.1, 0.6, 0.2, 0.1],  # ranking 1, 2, 0/3
        [0.5, 0.1, 0.3, 0.1],  # ranking 0, 2, ...
        [0.2, 0.2, 0.3, 0.3],  # ranking 2, 3 (tie -> lower index first), 0, 1
    ]
)
LABELS = np.array([2, 0, 0])


def test_topk_accuracy_hand_made() -> None:
    assert metrics.topk_accuracy(LOGITS, LABELS, k=1) == pytest.approx(1 / 3)
    assert metrics.topk_accuracy(LOGITS, LABELS, k=2) == pytest.approx(2 / 3)
    assert metrics.topk_accuracy(LOGITS, LABELS, k=3) == pytest.approx(1.0)
    assert metrics.topk_accuracy(LOGITS, LABELS, k=10) == 1.0
    assert metrics.topk_accuracy(LOGITS, LABELS, k=1) == accuracy(LOGITS, LABELS)
    assert metrics.topk_accuracy(dualflow.tensor(LOGITS), dualflow.tensor(LABELS), 2) == 2 / 3
    assert metrics.topk_accuracy(np.zeros((0, 3)), np.zeros(0, np.int64)) == 0.0


def test_topk_ties_break_to_the_lower_index_like_argmax() -> None:
    tied = np.array([[1.0, 1.0, 0.0]])
    assert metrics.topk_accuracy(tied, [0], k=1) == 1.0
    assert metrics.topk_accuracy(tied, [1], k=1) == 0.0


def test_topk_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="integer labels"):
        metrics.topk_accuracy(LOGITS, LABELS.astype(float))
    with pytest.raises(ValueError, match="k must be"):
        metrics.topk_accuracy(LOGITS, LABELS, k=0)


def test_confusion_matrix_and_per_class() -> None:
    pred, labels = [0, 0, 1, 2, 2, 2], [0, 1, 1, 2, 2, 0]
    expected = np.array([[1, 0, 1], [1, 1, 0], [0, 0, 2]])
    np.testing.assert_array_equal(metrics.confusion_matrix(pred, labels, 3), expected)
    np.testing.assert_array_equal(
        metrics.confusion_matrix(LOGITS, LABELS, 4),
        [[1, 0, 1, 0], [0, 0, 0, 0], [0, 1, 0, 0], [0] * 4],
    )
    per_class = metrics.per_class_accuracy(pred, labels, 4)
    np.testing.assert_allclose(per_class[:3], [0.5, 0.5, 1.0])
    assert np.isnan(per_class[3])
    with pytest.raises(ValueError, match=r"outside 0\.\.2"):
        metrics.confusion_matrix([3], [0], 3)


class Fixed(nn.Module):
    """Returns stored logits for the batch index encoded in its input."""

    def __init__(self) -> None:
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        assert not self.training and not dualflow.config.grad_enabled
        return self.drop(dualflow.tensor(LOGITS[x.numpy().astype(int)]))


def test_evaluate_reports_topk_loss_and_confusion_and_restores_mode() -> None:
    model = Fixed()
    loader = [
        (dualflow.tensor(np.array([0.0, 1.0])), dualflow.tensor(LABELS[:2])),
        (dualflow.tensor(np.array([2.0])), dualflow.tensor(LABELS[2:])),
    ]
    result = metrics.evaluate(
        model, loader, ks=(1, 2), num_classes=4, loss_fn=ops.softmax_cross_entropy, progress=True
    )
    assert model.training and model.drop.training
    assert result["count"] == 3
    assert result["top1"] == pytest.approx(1 / 3) and result["top2"] == pytest.approx(2 / 3)
    expected_loss = float(
        ops.softmax_cross_entropy(dualflow.tensor(LOGITS), dualflow.tensor(LABELS)).item()
    )
    assert result["loss"] == pytest.approx(expected_loss, rel=1e-6)
    np.testing.assert_array_equal(
        result["confusion_matrix"], metrics.confusion_matrix(LOGITS, LABELS, 4)
    )
    assert np.isnan(result["per_class_accuracy"][1])


def test_evaluate_empty_loader_and_without_tqdm(monkeypatch) -> None:
    import dualflow.training.progress as progress

    monkeypatch.setattr(progress, "tqdm", None)
    result = metrics.evaluate(Fixed(), [], ks=(1, 5))
    assert result == {"count": 0, "top1": None, "top5": None}
