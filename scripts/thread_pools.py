"""Do OpenBLAS's threads and dualflow's kernel threads get in each other's way? (issue 38)

One process; blocks of 10 repetitions alternate OpenBLAS's idle spin between its default (2**28
cycles) and 2**4 (what ``dualflow.background.blas.sleep_when_idle`` sets), re-read through the
library numpy loaded. Per GEMM shape: the GEMM alone and right after a fused kernel (dualflow's
float32 tanh over 4M elements, split over the kernel threads), the fused kernel alone and right
after a GEMM; GEMM times as ratios to numpy's alone with the default spin. Medians: the machine
is shared, so run it when it is quiet (``python scripts/thread_pools.py [blocks]``).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

from dualflow.background import blas
from dualflow.kernels.fast_math.fast_tanh import numpy_tanh

SHAPES = [(1024, 256, 1024), (64, 784, 1000), (256, 64, 32)]
KINDS = ("gemm alone", "gemm after fused", "fused alone", "fused after gemm")


def set_spin(exponent: int) -> None:
    """OpenBLAS's idle threads look for work 2**exponent cycles, from its next call on."""
    lib = blas.library()
    os.environ[blas.TIMEOUT_ENV] = str(exponent)
    lib.openblas_read_env()
    del os.environ[blas.TIMEOUT_ENV]
    lib.blas_thread_shutdown_()


def timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def main(blocks: int) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1 << 22, dtype=np.float32)
    y = np.empty_like(x)

    def fused() -> None:
        numpy_tanh(x, out=y)

    res: dict[tuple, list[float]] = {}
    for _ in range(blocks):
        for spin in (28, 4):
            set_spin(spin)
            for m, k, n in SHAPES:
                a = rng.standard_normal((m, k), dtype=np.float32)
                b = rng.standard_normal((k, n), dtype=np.float32)
                c = np.empty((m, n), np.float32)

                def gemm(a=a, b=b, c=c) -> None:
                    np.matmul(a, b, out=c)

                gemm(), fused()
                for _ in range(10):
                    gemm()
                    res.setdefault((spin, m, "gemm alone"), []).append(timed(gemm))
                    fused()
                    res.setdefault((spin, m, "gemm after fused"), []).append(timed(gemm))
                    res.setdefault((spin, m, "fused after gemm"), []).append(timed(fused))
                    fused()
                    res.setdefault((spin, m, "fused alone"), []).append(timed(fused))
    for m, k, n in SHAPES:
        med = {(s, kind): statistics.median(res[(s, m, kind)]) for s in (28, 4) for kind in KINDS}
        base = med[(28, "gemm alone")]
        print(f"{m}x{k} @ {k}x{n}: numpy alone {2 * m * k * n / base / 1e9:.0f} GFLOP/s")
        for s in (28, 4):
            print(
                f"  spin 2**{s:<2d}: gemm alone {base / med[(s, 'gemm alone')]:.2f}, after a "
                f"fused kernel {base / med[(s, 'gemm after fused')]:.2f} | fused kernel alone "
                f"{med[(s, 'fused alone')] * 1e3:.2f} ms, after a gemm "
                f"{med[(s, 'fused after gemm')] * 1e3:.2f} ms"
            )


if __name__ == "__main__":
    if blas.library() is None or not hasattr(blas.library(), "blas_thread_shutdown_"):
        sys.exit("numpy's BLAS is not an OpenBLAS with openblas_read_env/blas_thread_shutdown_")
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
