"""The op table: one OpInfo per op, driving forward, infer, gradcheck and double-backward tests.

Entries live in ``tests/op_entries/<group>.py`` (each module defines ``ENTRIES``); this module
collects them. ``tests/ops/test_op_table.py`` fails when a registered op has no entry.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Sample:
    """One call: positional inputs (numpy arrays or scalars) and keyword arguments.

    Float arrays are cast to the dtype under test; other inputs (labels, masks) are kept.
    ``grad`` lists the input positions to differentiate (default: every float array input).
    """

    inputs: tuple
    kwargs: dict = field(default_factory=dict)
    grad: tuple[int, ...] | None = None
    name: str = ""


@dataclass
class OpInfo:
    """How to test one op (or composite function).

    ``fn(*inputs, **kwargs)`` calls the public function; ``reference`` computes the expected
    float64 result with plain numpy; ``samples(rng)`` returns Samples that stay away from kinks
    and outside the domain. ``ops`` are the registered op names this entry covers.
    """

    name: str
    fn: Callable[..., Any]
    reference: Callable[..., Any] | None
    samples: Callable[[np.random.Generator], list[Sample]]
    ops: tuple[str, ...] = ()
    differentiable: bool = True
    double_differentiable: bool = True
    f32_tol: tuple[float, float] = (1e-5, 1e-6)  # (rtol, atol) of float32 vs the reference
    grad_tol: tuple[float, float] = (1e-5, 1e-6)  # (rtol, atol) of the float64 gradcheck
    eps: float = 1e-6
    composite: bool = False
    keeps_dtype: bool = True  # float32 inputs give float32 outputs (False for cast)

    def covers(self) -> tuple[str, ...]:
        return self.ops or (() if self.composite else (self.name,))


def _collect() -> list[OpInfo]:
    import tests.op_entries as package

    entries: list[OpInfo] = []
    for module in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        entries.extend(importlib.import_module(f"tests.op_entries.{module.name}").ENTRIES)
    return entries


OP_INFOS: list[OpInfo] = _collect()
