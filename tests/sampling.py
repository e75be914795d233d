"""Sample builders shared by the op-table entries: broadcasting shape pairs, domain-safe arrays."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tests.opinfo import Sample

# Shape pairs that exercise broadcasting in both directions, scalars and equal shapes.
BINARY_SHAPES = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 4)), ((), (2, 3)), ((5,), ())]
UNARY_SHAPES = [(3, 4), (2, 3, 2), ()]


def away_from(values: np.ndarray, kinks: tuple[float, ...], margin: float = 0.05) -> np.ndarray:
    """Push values that lie within ``margin`` of a kink (where the gradient jumps) away from it."""
    for k in kinks:
        close = np.abs(values - k) < margin
        values = np.where(close, k + np.where(values >= k, margin, -margin) * 2, values)
    return values


def unary_samples(
    low: float = -2.0, high: float = 2.0, kinks: tuple[float, ...] = (), **kwargs: object
) -> Callable[[np.random.Generator], list[Sample]]:
    """Samples of a unary op with inputs uniform in ``[low, high]``, avoiding ``kinks``."""

    def make(rng: np.random.Generator) -> list[Sample]:
        return [
            Sample(
                (away_from(rng.uniform(low, high, shape), kinks),), dict(kwargs), name=str(shape)
            )
            for shape in UNARY_SHAPES
        ]

    return make


def binary_samples(
    low: float = -2.0,
    high: float = 2.0,
    low_b: float | None = None,
    high_b: float | None = None,
    scalar: float | None = 1.5,
) -> Callable[[np.random.Generator], list[Sample]]:
    """Samples of a binary op over broadcasting shape pairs, plus one Python-scalar operand."""

    def make(rng: np.random.Generator) -> list[Sample]:
        lb = low if low_b is None else low_b
        hb = high if high_b is None else high_b
        out = [
            Sample((rng.uniform(low, high, sa), rng.uniform(lb, hb, sb)), name=f"{sa}x{sb}")
            for sa, sb in BINARY_SHAPES
        ]
        if scalar is not None:
            out.append(Sample((rng.uniform(low, high, (3,)), scalar), name="array-scalar"))
        return out

    return make
