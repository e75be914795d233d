"""Op-table entries for the fused arithmetic ops made by the fold pass (``fma``)."""

from __future__ import annotations

import numpy as np

from dualflow import ops
from tests.opinfo import OpInfo, Sample


def _fma_samples(rng: np.random.Generator) -> list[Sample]:
    return [
        Sample(tuple(rng.uniform(-2, 2, (3, 4)) for _ in range(3)), name="3x4"),
        Sample(
            (rng.uniform(-2, 2, (2, 3, 4)), rng.uniform(-2, 2, (4,)), rng.uniform(-2, 2, (3, 1))),
            name="broadcast",
        ),
        Sample((rng.uniform(-2, 2, (3,)), 1.5, rng.uniform(-2, 2, (3,))), name="scalar"),
    ]


ENTRIES = [OpInfo("fma", ops.fma, lambda a, b, c: a * b + c, _fma_samples)]
