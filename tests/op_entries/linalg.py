"""Op-table entries for matmul (all of numpy's rank cases) and linear."""

from __future__ import annotations

import numpy as np

from dualflow import ops
from tests.opinfo import OpInfo, Sample

_MATMUL_SHAPES = [
    ((3, 4), (4, 2)),
    ((2, 3, 4), (4, 5)),
    ((4,), (4, 3)),
    ((2, 3, 4), (4,)),
    ((4,), (4,)),
    ((2, 1, 3, 4), (5, 4, 2)),
    ((2, 2, 3, 4), (4, 5)),  # a stack of matrices times one matrix: one GEMM, forward and grad
    ((0, 3, 4), (4, 2)),
]


def _matmul_samples(rng: np.random.Generator) -> list[Sample]:
    return [
        Sample((rng.normal(size=a), rng.normal(size=b)), name=f"{a}@{b}") for a, b in _MATMUL_SHAPES
    ]


def _linear_samples(rng: np.random.Generator) -> list[Sample]:
    x, w, b = rng.normal(size=(5, 3)), rng.normal(size=(4, 3)), rng.normal(size=(4,))
    seq = rng.normal(size=(2, 5, 3))  # a linear layer on sequences: its weight's grad is one GEMM
    return [
        Sample((x, w, b), name="bias"),
        Sample((x, w), name="no-bias"),
        Sample((seq, w, b), name="sequence"),
    ]


ENTRIES = [
    OpInfo("matmul", ops.matmul, np.matmul, _matmul_samples),
    OpInfo("linear", ops.linear, lambda x, w, b=0.0: x @ w.T + b, _linear_samples, composite=True),
]
