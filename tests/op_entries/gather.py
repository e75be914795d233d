"""Op-table entries for take_along_axis, its scatter-add adjoint, scatter_add and argsort."""

from __future__ import annotations

import numpy as np

from dualflow import ops
from tests.opinfo import OpInfo, Sample

_IDX = np.array([[0, 2, 2, 1], [1, 1, 0, 0], [2, 0, 1, 2]])  # (3, 4): repeats along axis 1


def _take_samples(rng: np.random.Generator) -> list[Sample]:
    return [
        Sample((rng.normal(size=(3, 3)), _IDX, 1), name="axis1-repeats"),
        Sample((rng.normal(size=(3, 4)), _IDX[:2], 0), name="axis0-fewer"),
        Sample((rng.normal(size=(2, 3, 2)), np.array([[[1], [0], [1]]] * 2), -1), name="3d-neg"),
    ]


def _grad_ref(gy: np.ndarray, idx: np.ndarray, shape: tuple, axis: int) -> np.ndarray:
    out = np.zeros(shape)
    for position in np.ndindex(*idx.shape):
        target = list(position)
        target[axis] = idx[position]
        out[tuple(target)] += gy[position]
    return out


def _scatter_add_ref(x: np.ndarray, idx: np.ndarray, src: np.ndarray, axis: int) -> np.ndarray:
    return x + _grad_ref(src, idx, x.shape, axis)


def _argsort_ref(x: np.ndarray, axis: int = -1, descending: bool = False) -> np.ndarray:
    if descending:  # stable descending: sort the negated values stably
        return np.argsort(-x, axis=axis, kind="stable")
    return np.argsort(x, axis=axis, kind="stable")


def _argsort_samples(rng: np.random.Generator) -> list[Sample]:
    ties = np.array([[1.0, 3.0, 1.0, 2.0], [2.0, 2.0, 0.0, 2.0]])
    return [
        Sample((rng.normal(size=(3, 4)),), name="last"),
        Sample((ties, 1, True), name="ties-descending"),
        Sample((ties, 0), name="axis0"),
    ]


ENTRIES = [
    OpInfo(
        "take_along_axis",
        ops.take_along_axis,
        lambda x, idx, axis: np.take_along_axis(x, idx, axis),
        _take_samples,
    ),
    OpInfo(
        "take_along_axis_grad",
        ops.take_along_axis_grad,
        _grad_ref,
        lambda rng: [
            Sample((rng.normal(size=(3, 4)), _IDX, (3, 3), 1), name="repeats"),
            Sample((rng.normal(size=(2, 4)), _IDX[:2], (3, 4), 0), name="axis0"),
        ],
    ),
    OpInfo(
        "scatter_add",
        ops.scatter_add,
        _scatter_add_ref,
        lambda rng: [Sample((rng.normal(size=(3, 3)), _IDX, rng.normal(size=(3, 4)), 1))],
        composite=True,
    ),
    OpInfo("argsort", ops.argsort, _argsort_ref, _argsort_samples, differentiable=False),
]
