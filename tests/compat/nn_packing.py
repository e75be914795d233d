"""Compact reference files: every float array in one flat float64 vector plus a JSON index.

An ``.npz`` with hundreds of small arrays is mostly per-array headers; packing keeps the committed
references small. Non-float arrays (masks, key lists) are stored as themselves.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def save(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` to ``path``: floats packed (with their dtypes kept), the rest as is."""
    index, chunks, others, offset = {}, [], {}, 0
    for name, value in arrays.items():
        value = np.asarray(value)
        if value.dtype.kind == "f":
            index[name] = [offset, list(value.shape), value.dtype.name]
            chunks.append(value.astype(np.float64).ravel())
            offset += value.size
        else:
            others[name] = value
    values = np.concatenate(chunks) if chunks else np.zeros(0)
    np.savez_compressed(path, values=values, index=np.array(json.dumps(index)), **others)


def load(path: Path) -> dict[str, np.ndarray]:
    """Read a file written by ``save`` back into ``{name: array}``."""
    with np.load(path) as data:
        values = data["values"]
        index = json.loads(str(data["index"]))
        out = {name: data[name] for name in data.files if name not in ("values", "index")}
    for name, (offset, shape, dtype) in index.items():
        size = int(np.prod(shape))
        out[name] = values[offset : offset + size].reshape(shape).astype(dtype)
    return out
