"""Classification metrics for the training loop: ``accuracy``, ``evaluate`` and ``EpochMeter``.

Metrics are computed on host numpy copies of the outputs, after a step has finished, so they add
nothing to a compiled graph and never change what a training step computes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import numpy as np

from dualflow._config import no_grad
from dualflow.tensor.core import Tensor


def to_host(value: Any) -> np.ndarray:
    """A numpy array of a Tensor, an array (numpy or cupy) or a nested list.

    Example:
        >>> to_host([[1, 2]]).shape
        (1, 2)
    """
    if isinstance(value, Tensor):
        return value.numpy()
    if hasattr(value, "get"):  # a cupy array
        return value.get()
    return np.asarray(value)


def count_correct(logits: Any, labels: Any) -> int | None:
    """How many rows of ``logits`` have their argmax at ``labels``; None if not a classification.

    A batch counts as classification when ``labels`` are integers and ``logits`` has exactly one
    more (class) axis, the last one.

    Example:
        >>> count_correct([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]], [1, 1, 1])
        2
        >>> count_correct([[0.5], [0.2]], [0.5, 0.2]) is None   # regression targets
        True
    """
    scores, targets = to_host(logits), to_host(labels)
    if targets.dtype.kind not in "iu" or scores.ndim != targets.ndim + 1:
        return None
    if scores.shape[:-1] != targets.shape:
        return None
    return int((scores.argmax(axis=-1) == targets).sum())


def accuracy(logits: Any, labels: Any) -> float:
    """The fraction of samples whose highest-scoring class is the label.

    Args:
        logits: scores of shape ``(N, C)`` (or ``(..., C)``): a Tensor, an array or a list.
        labels: integer class indices of shape ``(N,)`` (or ``(...)``).

    Returns:
        A Python float in [0, 1].

    Raises:
        ValueError: the labels are not integers or the shapes do not pair up.

    Example:
        >>> accuracy([[0.1, 0.9], [0.8, 0.2]], [1, 1])
        0.5
    """
    correct = count_correct(logits, labels)
    if correct is None:
        raise ValueError(
            f"accuracy: expected logits (..., C) and integer labels (...), got shapes "
            f"{to_host(logits).shape} and {to_host(labels).shape} ({to_host(labels).dtype} labels)"
        )
    total = to_host(labels).size
    return correct / total if total else 0.0


def batch_size_of(labels: Any) -> int:
    """The number of samples in a batch: the length of its first axis (1 for a scalar)."""
    shape = getattr(labels, "shape", None)
    if shape is None:
        shape = np.shape(labels)
    return int(shape[0]) if len(shape) else 1


class Evaluation(NamedTuple):
    """The result of :func:`evaluate`: mean loss per sample and accuracy (None if undefined)."""

    loss: float
    accuracy: float | None


def evaluate(model: Any, loader: Iterable[Any], loss_fn: Callable[[Any, Any], Any]) -> Evaluation:
    """Mean loss and accuracy of ``model`` over ``loader``, in eval mode and without gradients.

    Dropout is off and batch norm uses its running statistics; every module's training flag is
    restored afterwards, whatever it was. Batches are ``(inputs, labels)`` pairs; the loss is
    averaged per sample (``loss_fn`` is assumed to return a batch mean).

    Args:
        model: a callable Module.
        loader: an iterable of ``(inputs, labels)`` batches.
        loss_fn: ``loss_fn(outputs, labels)`` returning a scalar Tensor.

    Returns:
        ``Evaluation(loss, accuracy)``; accuracy is None when the outputs are not class scores.

    Example:
        >>> import dualflow
        >>> from dualflow import nn, ops
        >>> model = nn.Linear(2, 2)
        >>> batch = (dualflow.tensor([[1.0, 0.0], [0.0, 1.0]]), dualflow.tensor([0, 1]))
        >>> result = evaluate(model, [batch], ops.softmax_cross_entropy)
        >>> result.accuracy in (0.0, 0.5, 1.0), model.training
        (True, True)
    """
    modes = [(module, module.training) for module in model.modules()]
    loss_sum, correct, count, scored = 0.0, 0, 0, True
    model.eval()
    try:
        with no_grad():
            for inputs, labels in loader:
                outputs = model(inputs)
                n = batch_size_of(labels)
                loss_sum += float(loss_fn(outputs, labels).item()) * n
                hits = count_correct(outputs, labels)
                scored = scored and hits is not None
                correct += hits or 0
                count += n
    finally:
        for module, mode in modes:  # per module: a frozen (eval) submodule stays frozen
            object.__setattr__(module, "training", mode)
    if count == 0:
        return Evaluation(float("nan"), None)
    return Evaluation(loss_sum / count, correct / count if scored else None)


class EpochMeter:
    """Running per-sample loss and accuracy of the current epoch; its state is checkpointed.

    Example:
        >>> meter = EpochMeter()
        >>> meter.update(loss=1.0, correct=3, n=4); meter.update(loss=0.5, correct=4, n=4)
        >>> meter.summary()
        {'loss': 0.75, 'accuracy': 0.875}
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget everything (start of an epoch)."""
        self.loss_sum, self.correct, self.count, self.steps, self.scored = 0.0, 0, 0, 0, True

    def update(self, loss: float, correct: int | None, n: int) -> None:
        """Add one batch: its mean loss, its correct count (None: not a classification), size."""
        self.loss_sum += loss * n
        self.count += n
        self.steps += 1
        self.scored = self.scored and correct is not None
        self.correct += correct or 0

    def summary(self) -> dict[str, float | None]:
        """``{"loss": mean loss per sample, "accuracy": fraction correct or None}``."""
        if self.count == 0:
            return {"loss": float("nan"), "accuracy": None}
        acc = self.correct / self.count if self.scored else None
        return {"loss": self.loss_sum / self.count, "accuracy": acc}

    def state_dict(self) -> dict[str, Any]:
        """Plain values, so a mid-epoch checkpoint resumes the epoch's averages exactly."""
        return dict(vars(self))

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a ``state_dict()``."""
        self.loss_sum, self.correct = float(state["loss_sum"]), int(state["correct"])
        self.count, self.steps = int(state["count"]), int(state["steps"])
        self.scored = bool(state["scored"])
