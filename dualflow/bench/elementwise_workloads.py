"""The bench's large elementwise workloads: fused chains on 4M (or 64M) float32, forward only.

Each builder returns ``{"step", "params", "baseline", "bytes"}`` like ``dualflow.bench.workloads``:
``baseline`` times the memory-bandwidth floor (a copy or a read) and ``bytes`` is what a fused
kernel must move per step, for the GB/s column.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import dualflow
from dualflow import ops
from dualflow.device import CPU, Device


def _randn(rng: np.random.Generator, shape: Any, device: Device) -> Any:
    return dualflow.tensor(rng.normal(size=shape).astype(np.float32), device=device)


BIG = 4 * 1024 * 1024  # elements of the large elementwise workloads (4M float32, 16 MiB)
HUGE = 64 * 1024 * 1024  # elements of the GPU-scale elementwise workload (64M float32, 256 MiB)


def _copy_of(x: Any) -> Callable[[], None]:
    def copy_only() -> None:
        # the memory-bandwidth floor: one read and one write of x
        x.array.copy()

    return copy_only


def build_elementwise(
    rng: np.random.Generator, device: Device = CPU, size: int = BIG
) -> dict[str, Any]:
    """``tanh(x*0.5+1)*sigmoid(x) - x**2`` on ``size`` float32, forward only under no_grad.

    ``bytes`` is what the fused kernel must move: read ``x`` once, write the result once.

    Example:
        >>> build_elementwise(np.random.default_rng(0), size=8)["bytes"]
        64
    """
    x = dualflow.tensor(rng.standard_normal(size, dtype=np.float32), device=device)

    def step() -> Any:
        with dualflow.no_grad():
            return ops.tanh(x * 0.5 + 1) * ops.sigmoid(x) - x**2

    return {"step": step, "params": [], "baseline": _copy_of(x), "bytes": 2 * x.array.nbytes}


def build_elementwise_64m(rng: np.random.Generator, device: Device = CPU) -> dict[str, Any]:
    """The ``elementwise`` chain on 64M float32 (256 MiB read, 256 MiB written per step).

    Example:
        >>> build_elementwise_64m(np.random.default_rng(0))["bytes"] // 2**20  # MiB per step
        512
    """
    return build_elementwise(rng, device, HUGE)


def build_arith_chain(rng: np.random.Generator, device: Device = CPU) -> dict[str, Any]:
    """An arithmetic-only 12-op chain (with a ``maximum``) on 4M float32, forward only.

    Example:
        >>> sorted(build_arith_chain(np.random.default_rng(0)))
        ['baseline', 'bytes', 'params', 'step']
    """
    x = _randn(rng, BIG, device)

    def step() -> Any:
        with dualflow.no_grad():
            h = ((x * 1.5 + 2.0) * x - 0.5) / (x * x + 1.0)
            h = ops.maximum(h * 0.75 - x * 0.25, 0.0)
            return h * h + x * 0.125

    return {"step": step, "params": [], "baseline": _copy_of(x), "bytes": 2 * x.array.nbytes}


def build_poly_chain(
    rng: np.random.Generator, device: Device = CPU, size: int = BIG
) -> dict[str, Any]:
    """The peers' arithmetic-only chain ``(x*0.5+1)*(x-2) - x*x`` on ``size`` float32 (no grad).

    Example:
        >>> built = build_poly_chain(np.random.default_rng(0), size=4)
        >>> built["step"]().shape, built["bytes"]
        ((4,), 32)
    """
    x = dualflow.tensor(rng.standard_normal(size, dtype=np.float32), device=device)

    def step() -> Any:
        with dualflow.no_grad():
            return (x * 0.5 + 1) * (x - 2) - x * x

    return {"step": step, "params": [], "baseline": _copy_of(x), "bytes": 2 * x.array.nbytes}


def build_sum_of_squares(
    rng: np.random.Generator, device: Device = CPU, size: int = BIG
) -> dict[str, Any]:
    """``((x - y) ** 2).sum()`` on ``size`` float32, forward only: one fused sum when compiled.

    ``bytes`` is what the fused kernel must move: read ``x`` and ``y`` once (eager also writes
    and reads back two ``size`` temporaries).

    Example:
        >>> build_sum_of_squares(np.random.default_rng(0), size=8)["bytes"]
        64
    """
    x, y = _randn(rng, size, device), _randn(rng, size, device)

    def step() -> Any:
        with dualflow.no_grad():
            return ((x - y) ** 2).sum()

    def read_only() -> None:
        # near the memory-bandwidth floor: BLAS dot products read each input once
        x.array.dot(x.array)
        y.array.dot(y.array)

    return {"step": step, "params": [], "baseline": read_only, "bytes": 2 * x.array.nbytes}
