"""Op-table entries for the cumulative ops: cumsum, cumprod, cummax, cummin, logcumsumexp."""

from __future__ import annotations

import numpy as np

from dualflow import ops
from tests.opinfo import OpInfo, Sample


def _scan(ufunc: np.ufunc, x: np.ndarray, axis: int, reverse: bool = False) -> np.ndarray:
    if x.ndim == 0:
        return x.copy()
    if reverse:
        return np.flip(ufunc.accumulate(np.flip(x, axis), axis=axis), axis)
    return ufunc.accumulate(x, axis=axis)


def _extreme_ref(better: np.ufunc, x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """A loop: the running extreme and the last index where x reached it (PyTorch's >=/<=)."""
    moved = np.moveaxis(x, axis, -1)
    values, indices = np.empty_like(moved), np.zeros(moved.shape, np.int64)
    for row in np.ndindex(*moved.shape[:-1]):
        best, where = moved[row][0], 0
        for i, v in enumerate(moved[row]):
            if better(v, best) == v:
                best, where = v, i
            values[row][i], indices[row][i] = best, where
    return np.moveaxis(values, -1, axis), np.moveaxis(indices, -1, axis)


def _with_zeros(rng: np.random.Generator) -> np.ndarray:
    x = rng.uniform(0.5, 1.5, size=(3, 5)) * rng.choice([-1.0, 1.0], size=(3, 5))
    x[0, 1] = 0.0  # one zero
    x[1, 2] = x[1, 4] = 0.0  # two zeros in a row
    return x


def _samples(rng: np.random.Generator) -> list[Sample]:
    return [
        Sample((rng.normal(size=(3, 4)), 1), name="last"),
        Sample((rng.normal(size=(4, 2, 3)), -3), name="neg-first"),
    ]


ENTRIES = [
    OpInfo(
        "cumsum",
        ops.cumsum,
        lambda x, axis, reverse=False: _scan(np.add, x, axis, reverse),
        lambda rng: [
            *_samples(rng),
            Sample((rng.normal(size=(2, 5)), 1, True), name="reverse"),
            Sample((np.asarray(rng.normal()), 0), name="0-d"),
        ],
    ),
    OpInfo(
        "cumprod",
        ops.cumprod,
        lambda x, axis: _scan(np.multiply, x, axis),
        lambda rng: [
            *_samples(rng),
            Sample((_with_zeros(rng), 1), name="zeros"),
            Sample((_with_zeros(rng), 0), name="zeros-axis0"),
        ],
    ),
    OpInfo(
        "cummax",
        ops.cummax,
        lambda x, axis: _extreme_ref(np.maximum, x, axis),
        _samples,
    ),
    OpInfo(
        "cummin",
        ops.cummin,
        lambda x, axis: _extreme_ref(np.minimum, x, axis),
        _samples,
    ),
    OpInfo(
        "logcumsumexp",
        ops.logcumsumexp,
        lambda x, axis, reverse=False: _scan(np.logaddexp, x, axis, reverse),
        lambda rng: [
            *_samples(rng),
            Sample((rng.normal(size=(2, 5)) * 3 + 1000.0, 1), name="large"),
            Sample((rng.normal(size=(2, 5)) * 30, 1, True), name="wide-reverse"),
        ],
    ),
]
