"""Op-table entries for the creation ops (full, full_like, arange); none has a gradient."""

from __future__ import annotations

import numpy as np

from dualflow import ops
from tests.opinfo import OpInfo, Sample

ENTRIES = [
    OpInfo(
        "full",
        ops.full,
        lambda shape, value, dtype=None: np.full(shape, value, dtype=dtype or np.float32),
        lambda rng: [
            Sample(((2, 3), 1.5), name="float"),
            Sample(((4,), 7, "int32"), name="int32"),
            Sample(((), -2.0, "float64"), name="scalar"),
        ],
        differentiable=False,
    ),
    OpInfo(
        "full_like",
        ops.full_like,
        lambda x, value, dtype=None: np.full_like(x, value, dtype=dtype),
        lambda rng: [
            Sample((rng.normal(size=(2, 3)), 0.5), name="same-dtype"),
            Sample((rng.normal(size=(3,)), 2, "int64"), name="int64"),
        ],
        differentiable=False,
        keeps_dtype=False,
    ),
    OpInfo(
        "arange",
        ops.arange,
        np.arange,
        lambda rng: [
            Sample((5,), name="stop"),
            Sample((1, 7, 2), name="start-stop-step"),
            Sample((2.0, -1.0, -0.5), name="float-negative-step"),
        ],
        differentiable=False,
    ),
    OpInfo(
        "copy",
        ops.copy,
        lambda x: np.array(x, copy=True),
        lambda rng: [Sample((rng.normal(size=(2, 3)),), name="2d")],
    ),
]
