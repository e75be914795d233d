"""The eager CUDA kernel cases of every registered elementwise op: input kinds (dtypes, or a weak
Python scalar in the last operand) and attribute values, per dtype; shared by the CPU checks
(render, nvcc, numpy types) and the GPU checks (run against numpy).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from dualflow.ops import OPS

FLOATS = ("float32", "float64")
INTS = ("int32", "int64")


class Case(NamedTuple):
    """One eager call pattern of op ``name``: ``kinds`` per input, ``attrs`` by name."""

    name: str
    kinds: tuple[Any, ...]
    attrs: dict[str, Any]

    @property
    def id(self) -> str:
        kinds = ",".join(k.__name__ if isinstance(k, type) else k for k in self.kinds)
        return f"{self.name}[{kinds}]"


def elementwise_ops() -> list[str]:
    """Names of the registered elementwise ops (those defined by a scalar expression)."""
    return sorted(name for name, op in OPS.items() if op.kind == "elementwise" and op.expr)


def _attrs(name: str, dtype: str) -> dict[str, Any]:
    values = {"lo": -1.0, "hi": 1.0, "slope": 0.2, "alpha": 1.0}
    values["dtype"] = "float64" if dtype == "float32" else "float32"
    return {a: values[a] for a in OPS[name].attr_names}


def cases(dtype: str) -> list[Case]:
    """Every elementwise op with all-array inputs of ``dtype`` and, for ops of two or more inputs,
    the same with a weak Python scalar (float, or int for integer dtypes) as the last input;
    ``where``'s condition is a bool array."""
    weak = float if np.dtype(dtype).kind == "f" else int
    found = []
    for name in elementwise_ops():
        args = OPS[name].args
        kinds = tuple("bool" if name == "where" and i == 0 else dtype for i in range(len(args)))
        found.append(Case(name, kinds, _attrs(name, dtype)))
        if len(args) >= 2:
            found.append(Case(name, kinds[:-1] + (weak,), _attrs(name, dtype)))
    return found


def sample(kind: Any, shape: tuple[int, ...], rng: np.random.Generator) -> Any:
    """An input of ``kind``: positive values keep log/sqrt/power in their domain."""
    if kind is float:
        return 0.75
    if kind is int:
        return 3
    if kind == "bool":
        return rng.random(shape) > 0.5
    if np.dtype(kind).kind in "iu":
        return rng.integers(1, 5, shape).astype(kind)
    return rng.uniform(0.1, 2.0, shape).astype(kind)
