"""Op-table entries for concat (a variadic primitive), the stack and split composites, and
sum_slice_grads (what passes.slice_grads makes of summed slice gradients)."""

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


def _slice_sum_samples(rng: np.random.Generator) -> list[Sample]:
    # pieces given in other shapes than their places (heads split off a feature axis), and as is
    def pieces(*shapes: tuple) -> tuple:
        return tuple(rng.normal(size=shape) for shape in shapes)

    heads = {"axis": 2, "shapes": ((3, 2, 4),) * 3}
    return [
        Sample(pieces((2, 3, 4), (6, 4), (3, 2, 2, 2)), heads, name="reshaped"),
        Sample(pieces((2, 1), (2, 3), (2, 2)), {"axis": 1, "shapes": ((2, 1), (2, 3), (2, 2))}),
    ]


def _slice_sum(a, b, c, axis, shapes):
    return ops.sum_slice_grads([a, b, c], axis, shapes)


def _slice_sum_ref(a, b, c, axis, shapes):
    pieces = [np.reshape(x, shape) + 0.0 for x, shape in zip((a, b, c), shapes)]
    return np.concatenate(pieces, axis=axis)


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
    OpInfo("sum_slice_grads", _slice_sum, _slice_sum_ref, _slice_sum_samples),
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
