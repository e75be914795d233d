"""Classification metrics for vision: top-k accuracy, confusion matrix, per-class accuracy.

``evaluate(model, loader, ks)`` runs a model over a loader (eval mode, no grad, progress bar)
and reports them; top-1 agrees with ``dualflow.training.accuracy``, whose helpers it reuses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from dualflow._config import no_grad
from dualflow.training.metrics import batch_size_of, to_host
from dualflow.training.progress import progress_bar


def _check_pair(scores: np.ndarray, targets: np.ndarray, name: str) -> None:
    if targets.dtype.kind not in "iu" or scores.ndim != 2 or scores.shape[0] != targets.shape[0]:
        raise ValueError(
            f"{name}: expected logits (N, C) and integer labels (N,), got shapes "
            f"{scores.shape} and {targets.shape} ({targets.dtype} labels)"
        )


def topk_correct(logits: Any, labels: Any, k: int = 1) -> int:
    """How many rows of ``logits`` rank their label among the ``k`` highest scores.

    Ties are broken towards the lower class index (as ``argmax``); ``k`` above the number of
    classes counts every row.

    Example:
        >>> topk_correct([[0.1, 0.5, 0.4], [0.6, 0.3, 0.1]], [2, 2], k=2)
        1
    """
    scores, targets = to_host(logits), to_host(labels)
    _check_pair(scores, targets, "topk_accuracy")
    if k < 1:
        raise ValueError(f"topk_accuracy: k must be >= 1, got {k}")
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return int((top == targets[:, None]).any(axis=1).sum())


def topk_accuracy(logits: Any, labels: Any, k: int = 1) -> float:
    """The fraction of rows whose label is among the ``k`` highest-scoring classes.

    Args:
        logits: scores ``(N, C)``: a Tensor, a numpy/cupy array or a list.
        labels: integer classes ``(N,)``.
        k: how many top classes count as a hit.

    Returns:
        A float in [0, 1] (0.0 for an empty batch).

    Raises:
        ValueError: shapes that do not pair up, non-integer labels or ``k < 1``.

    Example:
        >>> logits = [[0.1, 0.5, 0.4], [0.6, 0.3, 0.1]]
        >>> topk_accuracy(logits, [2, 0], k=1), topk_accuracy(logits, [2, 0], k=2)
        (0.5, 1.0)
    """
    n = to_host(labels).shape[0] if np.ndim(to_host(labels)) else 0
    return topk_correct(logits, labels, k) / n if n else 0.0


def _as_classes(pred: Any) -> np.ndarray:
    values = to_host(pred)
    return values.argmax(axis=-1) if values.ndim == 2 else values


def confusion_matrix(pred: Any, labels: Any, num_classes: int) -> np.ndarray:
    """Counts ``m[true, predicted]`` (rows: labels, columns: predictions, as scikit-learn).

    Args:
        pred: predicted classes ``(N,)``, or logits ``(N, C)`` (their argmax is used).
        labels: integer classes ``(N,)``.
        num_classes: the matrix size C.

    Returns:
        An int64 array ``(C, C)``.

    Raises:
        ValueError: a class outside ``0..C-1`` or lengths that differ.

    Example:
        >>> confusion_matrix([0, 1, 1, 2], [0, 1, 2, 2], num_classes=3)
        array([[1, 0, 0],
               [0, 1, 0],
               [0, 1, 1]])
    """
    p, t = _as_classes(pred).astype(np.int64).ravel(), to_host(labels).astype(np.int64).ravel()
    if p.shape != t.shape:
        raise ValueError(f"confusion_matrix: {p.size} predictions but {t.size} labels")
    for name, values in (("prediction", p), ("label", t)):
        if values.size and (values.min() < 0 or values.max() >= num_classes):
            raise ValueError(f"confusion_matrix: a {name} is outside 0..{num_classes - 1}")
    counts = np.bincount(t * num_classes + p, minlength=num_classes * num_classes)
    return counts.reshape(num_classes, num_classes)


def per_class_accuracy(pred: Any, labels: Any, num_classes: int) -> np.ndarray:
    """Per class, the fraction of its samples predicted correctly (recall); NaN if it has none.

    Example:
        >>> per_class_accuracy([0, 1, 1, 2], [0, 1, 2, 2], num_classes=4)
        array([1. , 1. , 0.5, nan])
    """
    return _per_class(confusion_matrix(pred, labels, num_classes))


def _per_class(matrix: np.ndarray) -> np.ndarray:
    totals = matrix.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(totals > 0, np.diag(matrix) / totals, np.nan)


def _run(model: Any, loader: Iterable[Any], progress: bool) -> Iterable[tuple[Any, Any, Any]]:
    """Yield ``(outputs, labels, n)`` per batch in eval mode; restore every module's mode."""
    modes = [(module, module.training) for module in model.modules()]
    total = len(loader) if hasattr(loader, "__len__") else None
    bar = progress_bar(total, 0, "evaluate", enabled=progress)
    model.eval()
    try:
        with no_grad():
            for inputs, labels in loader:
                yield model(inputs), labels, batch_size_of(labels)
                bar.update(1)
    finally:
        bar.close()
        for module, mode in modes:  # per module: a frozen (eval) submodule stays frozen
            object.__setattr__(module, "training", mode)


def evaluate(
    model: Any,
    loader: Iterable[Any],
    ks: Sequence[int] = (1, 5),
    num_classes: int | None = None,
    loss_fn: Callable[[Any, Any], Any] | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Top-k accuracies (and optionally loss and confusion matrix) of ``model`` over ``loader``.

    Eval mode and no grad (each module's mode is restored after); a tqdm bar if installed.

    Args:
        model: a callable Module returning logits ``(N, C)``.
        loader: an iterable of ``(inputs, labels)`` batches.
        ks: the k of each ``"top{k}"`` entry.
        num_classes: if given, add ``"confusion_matrix"`` and ``"per_class_accuracy"``.
        loss_fn: if given, add ``"loss"``, the per-sample mean of ``loss_fn(outputs, labels)``.
        progress: show a progress bar.

    Returns:
        ``{"count": n, "top1": ..., "top5": ..., ...}`` (accuracies None when ``n == 0``).

    Example:
        >>> import dualflow
        >>> from dualflow import nn
        >>> model = nn.Linear(2, 3)
        >>> batch = (dualflow.tensor([[1.0, 0.0], [0.0, 1.0]]), dualflow.tensor([0, 1]))
        >>> result = evaluate(model, [batch], ks=(1, 3), num_classes=3, progress=False)
        >>> result["count"], result["top3"], result["confusion_matrix"].sum()
        (2, 1.0, np.int64(2))
    """
    hits, count, loss_sum = dict.fromkeys(ks, 0), 0, 0.0
    matrix = np.zeros((num_classes, num_classes), np.int64) if num_classes else None
    for outputs, labels, n in _run(model, loader, progress):
        for k in ks:
            hits[k] += topk_correct(outputs, labels, k)
        if matrix is not None:
            matrix += confusion_matrix(outputs, labels, num_classes)
        if loss_fn is not None:
            loss_sum += float(loss_fn(outputs, labels).item()) * n
        count += n
    result: dict[str, Any] = {"count": count}
    result.update({f"top{k}": hits[k] / count if count else None for k in ks})
    if loss_fn is not None:
        result["loss"] = loss_sum / count if count else float("nan")
    if matrix is not None:
        result["confusion_matrix"] = matrix
        result["per_class_accuracy"] = _per_class(matrix)
    return result
