"""Op-table entries for softmax, log_softmax, one_hot and the losses (with the merged loss and
gradient of softmax cross entropy)."""

from __future__ import annotations

import numpy as np

from dualflow import ops
from tests.opinfo import OpInfo, Sample


def _softmax_ref(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _softmax_samples(rng: np.random.Generator) -> list[Sample]:
    return [
        Sample((rng.normal(size=(3, 4)),), name="2d"),
        Sample((rng.normal(size=(2, 3, 4)), 1), name="axis1"),
        Sample((rng.normal(size=(5,)) * 3,), name="1d"),
    ]


def _sce_ref(x: np.ndarray, t: np.ndarray, ignore_label: int = -1, reduce: str = "mean"):
    # Class axis 1; a plain loop over every (n, d...) position.
    xs = np.moveaxis(x, 1, -1).reshape(-1, x.shape[1])
    losses = np.zeros(len(xs))
    for i, (row, label) in enumerate(zip(xs, t.reshape(-1))):
        if label != ignore_label:
            losses[i] = np.log(np.sum(np.exp(row))) - row[label]
    if reduce in ("no", "none"):
        return losses.reshape(t.shape)
    count = max(int(np.sum(t != ignore_label)), 1)
    return losses.sum() / (count if reduce == "mean" else 1)


def _sce_samples(rng: np.random.Generator) -> list[Sample]:
    x = rng.normal(size=(4, 3)) * 2
    t = np.array([0, 2, -1, 1])
    x3, t3 = rng.normal(size=(2, 3, 2)), np.array([[0, 2], [-1, 1]])
    return [
        Sample((x, t), name="mean"),
        Sample((x, t), {"reduce": "sum"}, name="sum"),
        Sample((x, t), {"reduce": "no"}, name="no"),
        Sample((x, np.array([0, 2, 1, 1])), {"ignore_label": 1}, name="ignore-1"),
        Sample((x3, t3), name="nd-mean"),
        Sample((x3, t3), {"reduce": "none"}, name="nd-none"),
    ]


def _sce_grad_ref(x, t, gy, ignore_label: int = -1, reduce: str = "mean") -> np.ndarray:
    # d(loss)/dx by the formula on every (n, d...) position: (softmax - onehot) * gy / count
    xs = np.moveaxis(x, 1, -1).reshape(-1, x.shape[1])
    labels, g = t.reshape(-1), np.broadcast_to(np.asarray(gy), t.shape).reshape(-1)
    count = max(int(np.sum(labels != ignore_label)), 1) if reduce == "mean" else 1
    rows = np.zeros_like(xs)
    for i, (row, label) in enumerate(zip(xs, labels)):
        if label != ignore_label:
            rows[i] = np.exp(row) / np.sum(np.exp(row)) * g[i] / count
            rows[i, label] -= g[i] / count
    moved = rows.reshape((x.shape[0], *x.shape[2:], x.shape[1]))
    return np.moveaxis(moved, -1, 1)


def _sce_grad_samples(rng: np.random.Generator) -> list[Sample]:
    x, t = rng.normal(size=(4, 3)) * 2, np.array([0, 2, -1, 1])
    x3, t3 = rng.normal(size=(2, 3, 2)), np.array([[0, 2], [-1, 1]])
    gy, ignored = np.array(1.5), np.array([-1, -1, -1, -1])
    return [
        Sample((x, t, gy), name="mean"),
        Sample((x, t, gy), {"reduce": "sum"}, name="sum"),
        Sample((x, t, rng.normal(size=4)), {"reduce": "no"}, name="no"),
        Sample((x, np.array([0, 2, 1, 1]), gy), {"ignore_label": 1}, name="ignore-1"),
        Sample((x, ignored, gy), name="all-ignored"),
        Sample((x3, t3, gy), name="nd-mean"),
        Sample((x3, t3, rng.normal(size=(2, 2))), {"reduce": "none"}, name="nd-none"),
    ]


def _sce_and_grad_ref(x, t, gy, ignore_label: int = -1, reduce: str = "mean") -> tuple:
    attrs = {"ignore_label": ignore_label, "reduce": reduce}
    loss = _sce_ref(x, t, **attrs)
    if reduce == "mean" and not np.any(t != ignore_label):
        loss = np.nan  # a mean over no labels, as PyTorch's (its gradient is 0)
    return loss, _sce_grad_ref(x, t, gy, **attrs)


def _one_hot_ref(t: np.ndarray, num_classes: int, axis: int = -1) -> np.ndarray:
    out = np.eye(num_classes)[t]  # classes on the last axis
    return np.moveaxis(out, -1, axis)


def _sigmoid_ce_ref(x: np.ndarray, t: np.ndarray, reduce: str = "mean") -> np.ndarray:
    p = 1 / (1 + np.exp(-x))
    loss = np.where(t == -1, 0.0, -(t * np.log(p) + (1 - t) * np.log(1 - p)))
    if reduce == "no":
        return loss
    return loss.sum() / (max(np.sum(t != -1), 1) if reduce == "mean" else 1)


def _sigmoid_ce_samples(rng: np.random.Generator) -> list[Sample]:
    x, t = rng.normal(size=(3, 4)) * 2, rng.integers(-1, 2, size=(3, 4))
    return [Sample((x, t), {"reduce": r}, name=r) for r in ("mean", "sum", "no")]


def _mse_samples(rng: np.random.Generator) -> list[Sample]:
    return [Sample((rng.normal(size=(3, 4)), rng.normal(size=(3, 4))))]


ENTRIES = [
    OpInfo("softmax", ops.softmax, _softmax_ref, _softmax_samples),
    OpInfo(
        "log_softmax",
        ops.log_softmax,
        lambda x, axis=-1: np.log(_softmax_ref(x, axis)),
        _softmax_samples,
    ),
    OpInfo(
        "softmax_cross_entropy",
        ops.softmax_cross_entropy,
        _sce_ref,
        _sce_samples,
        f32_tol=(1e-4, 1e-5),
    ),
    OpInfo(
        "softmax_cross_entropy_grad",
        ops.softmax_cross_entropy_grad,
        _sce_grad_ref,
        _sce_grad_samples,
        f32_tol=(1e-4, 1e-5),
    ),
    OpInfo(
        "softmax_cross_entropy_and_grad",
        ops.softmax_cross_entropy_and_grad,
        _sce_and_grad_ref,
        _sce_grad_samples,
        differentiable=False,
        f32_tol=(1e-4, 1e-5),
    ),
    OpInfo(
        "one_hot",
        ops.one_hot,
        _one_hot_ref,
        lambda rng: [
            Sample((np.array([[0, 3, 1], [2, 2, 0]]), 4), name="last"),
            Sample((np.array([[0, 3, 1], [2, 2, 0]]), 4), {"axis": 1}, name="axis1"),
        ],
        differentiable=False,
        keeps_dtype=False,
    ),
    OpInfo(
        "sigmoid_cross_entropy",
        ops.sigmoid_cross_entropy,
        _sigmoid_ce_ref,
        _sigmoid_ce_samples,
        composite=True,
        f32_tol=(1e-4, 1e-5),
    ),
    OpInfo(
        "mean_squared_error",
        ops.mean_squared_error,
        lambda a, b: np.mean((a - b) ** 2),
        _mse_samples,
        composite=True,
    ),
]
