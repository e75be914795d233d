"""Op-table entry for ``adam_update`` (one Adam step of a parameter and both moments; not
differentiable)."""

from __future__ import annotations

import numpy as np

from dualflow import ops
from tests.opinfo import OpInfo, Sample

_EPS = 1e-8


def _adam_ref(p, g, m, v, decay, c1, b2, c2, step_size, root, eps=_EPS) -> tuple:
    m1 = m + c1 * (g - m)
    v1 = v * b2 + c2 * g * g
    return p * decay - step_size * m1 / (np.sqrt(v1) / root + eps), m1, v1


def _adam_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for shape, decay in (((4, 3), 1.0), ((7,), 0.999), ((2, 3, 5), 0.9)):
        p, g, m = (rng.normal(size=shape) for _ in range(3))
        v = rng.uniform(0.1, 2.0, shape)
        scalars = (decay, 0.1, 0.999, 0.001, 0.01, 0.3)
        ins = (p, g, m, v, *(np.asarray(s) for s in scalars))
        out.append(Sample(ins, kwargs={"eps": _EPS}, name=str(shape)))
    return out


ENTRIES = [
    OpInfo("adam_update", ops.adam_update, _adam_ref, _adam_samples, differentiable=False),
]
