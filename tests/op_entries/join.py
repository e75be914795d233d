"""Op-table entries for concat (a variadic primitive) and the stack and split composites."""

from __future__ import annotations

import numpy as np

from dualflow import ops
from tests.opinfo import OpInfo, Sample


def _concat_samples(rng: np.random.Generator) -> list[Sample]:
    # Inputs are separate positional arrays so the table casts each one to the dtype under test.
    return [
        Sample(tuple(rng.normal(size=(2, n)) for n in (1, 3, 2)), {"axis": 1}, name="sizes-1-3-2"),
        Sample(tuple(rng.normal(size=(n, 2, 2)) for n in (2, 1, 3)), {"axis": 0}, name="axis-0"),
        Sample(
            tuple(rng.normal(size=(2, 1, n)) for n in (3, 0, 1)), {"axis": -1}, name="empty-one"
        ),
    ]


def _stack_samples(rng: np.random.Generator) -> list[Sample]:
    return [
        Sample(tuple(rng.normal(size=(2, 3)) for _ in range(3)), {"axis": axis}, name=str(axis))
        for axis in (0, 2, -2)
    ]


def _split_samples(rng: np.random.Generator) -> list[Sample]:
    return [
        Sample((rng.normal(size=(6, 2)), 3), name="sections"),
        Sample((rng.normal(size=(2, 5)), [1, 3], 1), name="indices"),
        Sample((rng.normal(size=(2, 5)), [3, 1, -1], -1), name="decreasing-negative"),
        Sample((rng.normal(size=(4,)), [2, 9]), name="past-the-end"),
    ]


ENTRIES = [
    OpInfo(
        "concat",
        lambda a, b, c, axis: ops.concat([a, b, c], axis=axis),
        lambda a, b, c, axis: np.concatenate([a, b, c], axis=axis),
        _concat_samples,
    ),
    OpInfo(
        "stack",
        lambda a, b, c, axis: ops.stack([a, b, c], axis=axis),
        lambda a, b, c, axis: np.stack([a, b, c], axis=axis),
        _stack_samples,
        composite=True,
    ),
    OpInfo(
        "split",
        ops.split,
        lambda x, s, axis=0: tuple(np.split(x, s, axis)),
        _split_samples,
        composite=True,
    ),
]
