"""Op-table entries for embedding (lookup) and embedding_grad (scatter-add); ids repeat."""

from __future__ import annotations

import numpy as np

from dualflow import ops
from tests.opinfo import OpInfo, Sample

_IDS = np.array([[1, 4, 1], [0, 1, 3]])  # id 1 three times, id 2 never


def _lookup_ref(ids: np.ndarray, weight: np.ndarray) -> np.ndarray:
    return np.stack([weight[i] for i in ids.reshape(-1)]).reshape(ids.shape + weight.shape[1:])


def _scatter_ref(gy: np.ndarray, ids: np.ndarray, num: int) -> np.ndarray:
    out = np.zeros((num,) + gy.shape[ids.ndim :])
    for position in np.ndindex(*ids.shape):
        out[ids[position]] += gy[position]
    return out


ENTRIES = [
    OpInfo(
        "embedding",
        ops.embedding,
        _lookup_ref,
        lambda rng: [
            Sample((_IDS, rng.normal(size=(5, 4))), name="2d-ids"),
            Sample((np.array([3, 3]), rng.normal(size=(4,))), name="1d-weight"),
        ],
    ),
    OpInfo(
        "embedding_grad",
        ops.embedding_grad,
        _scatter_ref,
        lambda rng: [Sample((rng.normal(size=(2, 3, 4)), _IDS, 5), name="repeats")],
    ),
]
