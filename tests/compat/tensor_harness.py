"""The compatibility-table machinery shared by the reference script (run with torch) and the
tests (run with dualflow): cases, input generation, and running one case with either library.

A case is ``fn(L, *inputs)``, the *same source* for both libraries: ``L`` is a namespace with
``F`` (``torch.nn.functional`` or ``dualflow.nn.functional``), ``nn`` and the dtype names, and
the inputs are tensors of that library. This module imports numpy only, so the reference
script runs in a venv with torch and without dualflow's dependencies.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

DTYPES = ("float32", "float64", "float16", "long", "int32", "int64", "bool")


@dataclass
class Case:
    """One call of a Tensor method, functional or loss.

    ``inputs(rng)`` returns numpy arrays (and Python scalars); float arrays at ``grad``
    positions (default: all of them, or none when ``grad=()``) require grad, and the reference
    holds the gradients of ``sum(output * cotangent)`` with respect to them. ``compiled``: the
    test also runs the call under ``dualflow.compile`` (calls building no Module, which a
    compiled function cannot do); ``compiled_xfail``: why that is known to fail (strict xfail).
    """

    id: str
    fn: Callable[..., Any]
    inputs: Callable[[np.random.Generator], tuple]
    grad: tuple[int, ...] | None = None
    compiled: bool = True
    compiled_xfail: str = ""
    tol: tuple[float, float] = (1e-9, 1e-11)
    notes: str = field(default="")

    def grad_positions(self, values: tuple) -> tuple[int, ...]:
        if self.grad is not None:
            return self.grad
        return tuple(
            i for i, v in enumerate(values) if isinstance(v, np.ndarray) and v.dtype.kind == "f"
        )


def rng_for(case_id: str) -> np.random.Generator:
    """A generator seeded by the case id, so adding a case changes no other case's data."""
    return np.random.default_rng(zlib.crc32(case_id.encode()))


# ----- input makers (float64 unless the name says otherwise) -----------------------------------
def normal(*shape: int) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: rng.standard_normal(shape)


def positive(*shape: int) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: rng.uniform(0.5, 2.0, shape)


def prob(*shape: int) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: rng.uniform(0.05, 0.95, shape)


def distinct(*shape: int) -> Callable[[np.random.Generator], np.ndarray]:
    """Well-separated values without ties (max/min/sort have kinks at ties)."""
    n = int(np.prod(shape))
    return lambda rng: rng.permutation(n).reshape(shape) * 0.37 - 1.0


def ints(high: int, *shape: int, low: int = 0) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: rng.integers(low, high, shape).astype(np.int64)


def mask(*shape: int) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: rng.uniform(size=shape) > 0.5


def const(value: Any) -> Callable[[np.random.Generator], Any]:
    return lambda rng: value


def make(*makers: Callable[[np.random.Generator], Any]) -> Callable[[np.random.Generator], tuple]:
    """``inputs`` from one maker per positional input."""
    return lambda rng: tuple(m(rng) for m in makers)


# ----- running a case -----------------------------------------------------------------------
def flatten(out: Any) -> list[Any]:
    """Outputs as a flat list: tensors, and Python values (ints, floats, bools, tuples of ints
    such as a Size) as leaves."""
    if isinstance(out, tuple | list) and not _is_shape(out):
        return [leaf for item in out for leaf in flatten(item)]
    return [out]


def _is_shape(value: Any) -> bool:
    return type(value).__name__ in ("Size",) or (
        isinstance(value, tuple) and bool(value) and all(type(v) is int for v in value)
    )


def to_numpy(value: Any) -> np.ndarray:
    """A leaf output as a numpy array (tensors through ``.detach()``/``.numpy()``)."""
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        return np.asarray(value.detach().numpy()).copy()
    if isinstance(value, float):
        return np.asarray(value, np.float64)
    if isinstance(value, bool):
        return np.asarray(value, np.bool_)
    if isinstance(value, int):
        return np.asarray(value, np.int64)
    return np.asarray(tuple(value) if _is_shape(value) else value)


def is_tensor(value: Any) -> bool:
    return hasattr(value, "detach") and hasattr(value, "shape") and hasattr(value, "dtype")


def cotangent(case_id: str, index: int, shape: tuple[int, ...]) -> np.ndarray:
    """The fixed weights of output ``index`` in the gradient check's scalar."""
    return rng_for(f"{case_id}/cotangent/{index}").standard_normal(shape)
