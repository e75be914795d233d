"""Op-table entry for ``debug_print`` (prints at every run; its value is a 0-d token)."""

from __future__ import annotations

import numpy as np

from dualflow.ops import OPS
from dualflow.ops.dispatch import apply
from tests.opinfo import OpInfo, Sample


def _print(x: object) -> object:
    return apply(OPS["debug_print"], x, format="value {}", names=())


ENTRIES = [
    OpInfo(
        "debug_print",
        _print,
        lambda x: np.zeros((), dtype=bool),
        lambda rng: [Sample((rng.normal(size=(2, 3)),), name="matrix")],
        differentiable=False,
        keeps_dtype=False,
    ),
]
