"""Op-table entry for ``assign`` (the in-place state write; not differentiable)."""

from __future__ import annotations

import numpy as np

import dualflow
from dualflow import ops
from tests.opinfo import OpInfo, Sample


def _assign(target: object, value: object) -> object:
    # The table passes fresh arrays; wrap the target so assign writes into a tensor.
    return ops.assign(dualflow.as_tensor(np.array(target)), value)


ENTRIES = [
    OpInfo(
        "assign",
        _assign,
        lambda target, value: np.broadcast_to(value, target.shape),
        lambda rng: [Sample((rng.normal(size=(2, 3)), rng.normal(size=(3,))), name="bcast")],
        differentiable=False,
    ),
]
