"""Op-table entries for reshape, transpose, broadcast_to, sum_to and the reshape composites."""

from __future__ import annotations

import numpy as np

from dualflow import ops
from tests.opinfo import OpInfo, Sample


def _one(shape: tuple, **kwargs: object) -> object:
    return lambda rng: [Sample((rng.normal(size=shape),), kwargs, name=str(shape))]


def _sum_to_ref(x: np.ndarray, shape: tuple) -> np.ndarray:
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape) if d == 1)
    return x.sum(axis=axes, keepdims=True).reshape(shape)


ENTRIES = [
    OpInfo(
        "reshape",
        ops.reshape,
        np.reshape,
        lambda rng: [
            Sample((rng.normal(size=(2, 6)), (3, -1)), name="infer-dim"),
            Sample((rng.normal(size=(4,)), (2, 2, 1)), name="grow"),
            Sample((rng.normal(size=()), (1, 1)), name="scalar"),
        ],
    ),
    OpInfo(
        "transpose",
        ops.transpose,
        np.transpose,
        lambda rng: [
            Sample((rng.normal(size=(2, 3, 4)),), name="reverse"),
            Sample((rng.normal(size=(2, 3, 4)), (1, -1, 0)), name="perm"),
        ],
    ),
    OpInfo(
        "broadcast_to",
        ops.broadcast_to,
        np.broadcast_to,
        lambda rng: [
            Sample((rng.normal(size=(3, 1)), (2, 3, 4)), name="grow"),
            Sample((rng.normal(size=()), (2,)), name="scalar"),
        ],
    ),
    OpInfo(
        "sum_to",
        ops.sum_to,
        _sum_to_ref,
        lambda rng: [
            Sample((rng.normal(size=(2, 3, 4)), (3, 1)), name="lead-and-inner"),
            Sample((rng.normal(size=(2, 3)), (2, 3)), name="identity"),
            # a conv bias's gradient: kernels/norm/channel_sums (float64 sums, split by channel)
            Sample((rng.normal(size=(2, 3, 4, 4)), (3, 1, 1)), name="bias-gradient"),
        ],
    ),
    OpInfo(
        "expand_dims",
        ops.expand_dims,
        np.expand_dims,
        lambda rng: [
            Sample((rng.normal(size=(2, 3)), -1), name="last"),
        ],
        composite=True,
    ),
    OpInfo(
        "squeeze",
        ops.squeeze,
        np.squeeze,
        lambda rng: [
            Sample((rng.normal(size=(2, 1, 3, 1)),), name="all"),
            Sample((rng.normal(size=(2, 1, 3, 1)), 1), name="one"),
        ],
        composite=True,
    ),
    OpInfo(
        "flatten", ops.flatten, lambda x: x.reshape(x.shape[0], -1), _one((2, 3, 4)), composite=True
    ),
]
