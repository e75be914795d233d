"""Op-table entries for reductions (sum, prod, max, min, argmax, argmin) and their composites."""

from __future__ import annotations

import numpy as np

from dualflow import ops
from tests.opinfo import OpInfo, Sample


def _distinct(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    # max/min have kinks where two elements tie: use a permutation of well-separated values.
    return (rng.permutation(int(np.prod(shape))).reshape(shape) * 0.3 - 1.0).astype(np.float64)


def _reduce_samples(distinct: bool = False) -> object:
    def make(rng: np.random.Generator) -> list[Sample]:
        x = _distinct(rng, (2, 3, 4)) if distinct else rng.normal(size=(2, 3, 4))
        return [
            Sample((x,), name="all"),
            Sample((x, 1), name="axis1"),
            Sample((x,), {"axis": (0, 2), "keepdims": True}, name="axes-keepdims"),
            Sample((x, -1), name="negative-axis"),
        ]

    return make


def _prod_samples(rng: np.random.Generator) -> list[Sample]:
    x = rng.uniform(0.5, 1.5, (2, 3, 4)) * rng.choice([-1.0, 1.0], (2, 3, 4))
    one_zero = x.copy()
    one_zero[0, 1, 2] = 0.0  # a slice with one zero: its gradient is the product of the others
    return [
        Sample((x,), name="all"),
        Sample((x, 1), name="axis1"),
        Sample((x,), {"axis": (0, 2), "keepdims": True}, name="axes-keepdims"),
        Sample((one_zero, 2), name="one-zero"),
    ]


def _ties(rng: np.random.Generator) -> list[Sample]:
    return [Sample((np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]), 1), name="ties")]


def _lse_ref(x: np.ndarray, axis: object = None, keepdims: bool = False) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isinf(m), 0.0, m).astype(x.dtype)  # torch.logsumexp masks an infinite max
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def _lse_infinite(rng: np.random.Generator) -> list[Sample]:
    """Slices of all -inf give -inf (not NaN), one holding +inf gives +inf, as in PyTorch."""
    x = rng.normal(size=(4, 3))
    x[0] = -np.inf
    x[1, 0] = -np.inf
    x[2, 1] = np.inf
    return [
        Sample((x, 1), name="rows"),
        Sample((x[:1],), name="all"),
        Sample((x[:2].T, 0), {"keepdims": True}, name="columns-keepdims"),
    ]


ENTRIES = [
    OpInfo("sum", ops.sum, np.sum, _reduce_samples()),
    OpInfo("prod", ops.prod, np.prod, _prod_samples),
    OpInfo("max", ops.max, np.max, _reduce_samples(distinct=True)),
    OpInfo("min", ops.min, np.min, _reduce_samples(distinct=True)),
    OpInfo("max_ties", ops.max, np.max, _ties, ops=("max",), differentiable=False),
    OpInfo(
        "argmax",
        ops.argmax,
        np.argmax,
        lambda rng: [Sample((_distinct(rng, (3, 4)), 1))],
        differentiable=False,
    ),
    OpInfo(
        "argmin",
        ops.argmin,
        np.argmin,
        lambda rng: [Sample((_distinct(rng, (3, 4)),))],
        differentiable=False,
    ),
    OpInfo("mean", ops.mean, np.mean, _reduce_samples(), composite=True),
    OpInfo("var", ops.var, np.var, _reduce_samples(), composite=True),
    OpInfo("std", ops.std, np.std, _reduce_samples(), composite=True),
    OpInfo("logsumexp", ops.logsumexp, _lse_ref, _reduce_samples(), composite=True),
    OpInfo(
        "logsumexp_infinite",
        ops.logsumexp,
        _lse_ref,
        _lse_infinite,
        differentiable=False,
        composite=True,
    ),
    OpInfo(
        "stop_gradient",
        ops.stop_gradient,
        lambda x: x,
        lambda rng: [Sample((rng.normal(size=(3,)),))],
        differentiable=False,
    ),
]
