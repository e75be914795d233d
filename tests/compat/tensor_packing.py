"""Compact reference files for the tensor/functional/loss tables: one flat vector per dtype and a
JSON index, instead of hundreds of tiny ``.npz`` members (whose headers would dominate the size).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def save(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write ``{name: array}``: arrays of one dtype share a vector; strings stay in the index."""
    index: dict[str, list] = {}
    chunks: dict[str, list[np.ndarray]] = {}
    sizes: dict[str, int] = {}
    for name, value in arrays.items():
        value = np.asarray(value)
        if value.dtype.kind == "U":
            index[name] = ["str", str(value)]
            continue
        dtype = value.dtype.name
        index[name] = [dtype, sizes.get(dtype, 0), list(value.shape)]
        chunks.setdefault(dtype, []).append(value.ravel())
        sizes[dtype] = sizes.get(dtype, 0) + value.size
    packed = {f"dtype_{d}": np.concatenate(parts) for d, parts in chunks.items()}
    np.savez_compressed(path, index=np.array(json.dumps(index)), **packed)


def load(path: Path) -> dict[str, np.ndarray]:
    """Read a file written by ``save`` back into ``{name: array}``."""
    with np.load(path, allow_pickle=False) as data:
        index = json.loads(str(data["index"]))
        vectors = {name[len("dtype_") :]: data[name] for name in data.files if name != "index"}
    out: dict[str, np.ndarray] = {}
    for name, entry in index.items():
        if entry[0] == "str":
            out[name] = np.array(entry[1])
            continue
        dtype, offset, shape = entry
        size = int(np.prod(shape))
        out[name] = vectors[dtype][offset : offset + size].reshape(shape).copy()
    return out
