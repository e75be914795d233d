"""The machine's GEMM rate and memory bandwidth, measured once in this process: the yardsticks
``dualflow bench`` and ``explain(profile=True)`` print each row's or step's share of.

The GEMM rate is numpy's float32 ``n x n x n`` matmul (its BLAS, all its threads), best of a few
runs (a busy machine only slows a run down); the bandwidth is bytes read and written per second
by a copy split over the kernel threads (``kernels.base.cpu_threads``), as fused kernels run.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dualflow.kernels.base.cpu_threads import run_parts, split, threads


@dataclass(frozen=True)
class MachineRates:
    """What this machine reached: GFLOP/s of a large float32 GEMM, GB/s of a large copy."""

    gemm_gflops: float
    bandwidth_gbps: float
    threads: int

    def describe(self) -> str:
        """One line naming both rates.

        Example:
            >>> MachineRates(250.0, 20.0, 2).describe()
            'machine: float32 GEMM 250.0 GFLOP/s, copy bandwidth 20.0 GB/s (2 threads)'
        """
        return (
            f"machine: float32 GEMM {self.gemm_gflops:.1f} GFLOP/s, copy bandwidth "
            f"{self.bandwidth_gbps:.1f} GB/s ({self.threads} threads)"
        )

    def gemm_share(self, gflops: float) -> float:
        """``gflops`` as a fraction of the GEMM rate.

        Example:
            >>> MachineRates(200.0, 20.0, 2).gemm_share(150.0)
            0.75
        """
        return gflops / self.gemm_gflops if self.gemm_gflops > 0 else 0.0

    def bandwidth_share(self, gbps: float) -> float:
        """``gbps`` as a fraction of the copy bandwidth.

        Example:
            >>> MachineRates(200.0, 20.0, 2).bandwidth_share(10.0)
            0.5
        """
        return gbps / self.bandwidth_gbps if self.bandwidth_gbps > 0 else 0.0


def _best(call: Callable[[], object], repeats: int) -> float:
    """The fastest of ``repeats`` timed calls after one untimed (seconds)."""
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def measure(n: int = 1024, copy_bytes: int = 64 << 20, repeats: int = 5) -> MachineRates:
    """Measure both rates now (~0.2 s at the defaults).

    Example:
        >>> rates = measure(n=64, copy_bytes=1 << 16, repeats=2)
        >>> rates.gemm_gflops > 0 and rates.bandwidth_gbps > 0
        True
    """
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, n, n), dtype=np.float32)
    c = np.empty((n, n), np.float32)
    gemm = _best(lambda: np.matmul(a, b, out=c), repeats)
    source = np.ones(copy_bytes // 4, np.float32)
    target = np.empty_like(source)
    count = threads()
    parts = split(source.size, count)

    def copy() -> None:
        run_parts([lambda a=a_, b=b_: np.copyto(target[a:b], source[a:b]) for a_, b_ in parts])

    seconds = _best(copy, repeats)
    return MachineRates(2 * n**3 / gemm / 1e9, 2 * source.nbytes / seconds / 1e9, count)


@functools.cache
def machine_rates() -> MachineRates:
    """This process's measurement (made at the first call, kept after).

    Example:
        >>> machine_rates() is machine_rates()
        True
    """
    return measure()
