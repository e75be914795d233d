"""How many rows ``x`` of ``x @ W.T`` (a few rows times a column-major matrix) may have for the
product to run faster transposed, ``(W @ x.T).T``: measured on this machine (its BLAS on one
thread, scaled to its thread count by a model), once, and kept in the kernels cache, so every
process on the machine routes alike.

OpenBLAS picks its kernels by the operands' layout and the CPU: on one AVX-512 Zen 4 the direct
form of a 16 x 256 x 1024 float32 product ran at half the transposed one's rate, and where the
two meet depends on the machine. A constant tuned there (64 rows) was a guess everywhere else.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from dualflow.disk_cache import open_store as open_store  # the store the count is kept in
from dualflow.kernels.base.per_machine import PerMachine, best_of, one_blas_thread
from dualflow.kernels.base.per_machine import machine_key as machine_key

CANDIDATES = (2, 4, 8, 16, 32, 64, 128, 256)
"""Row counts the probe times (one row is a matrix-vector product either way; at 256 rows the
transposed form's copy of the result already cost more than its GEMM saved, 0.7-0.9x)."""
PROBE = (256, 1024)
"""(K, N) of the probe's W.T: a linear layer's or an LSTM step's (hidden 256, four gates)."""
MARGIN = 1.05
"""The transposed form (a GEMM and a copy of the result) must save this factor over the rows up
to the threshold to be taken at all: below it, the plain product is kept (no scratch)."""
REPEATS = 7


def choose(ratios: dict[int, float]) -> int:
    """The row count up to which the transposed form saves most: ``ratios`` maps rows to the
    direct form's time over the transposed one's; the threshold is the row count whose prefix
    (every candidate up to it) has the largest product of ratios, when that product is at least
    ``MARGIN`` (0: never). One noisy candidate moves the product, not the whole choice, and a
    tie neither opens nor closes the route.

    Example:
        >>> choose({2: 1.0, 16: 2.0, 64: 1.1, 128: 0.8, 256: 1.1})
        64
        >>> choose({2: 1.0, 16: 1.02}), choose({})
        (0, 0)
    """
    best, gain, total = 0, 0.0, 0.0
    for rows in sorted(ratios):
        total += math.log(ratios[rows])
        if total > gain:
            best, gain = rows, total
    return best if gain >= math.log(MARGIN) else 0


def predicted_ratio(direct: float, gemm: float, copy: float, threads: int) -> float:
    """The direct form's time over the transposed one's on ``threads`` BLAS threads, from
    one-thread times: both GEMMs split over the threads, the copy of the result does not (it is
    one numpy call). The model keeps the measurement off the threads' hand-offs, which a busy
    machine stretches to whole scheduler ticks (16-rows GEMMs of 8 ms instead of 0.1).

    Example:
        >>> predicted_ratio(2.0, 1.0, 0.0, 2), predicted_ratio(2.0, 1.0, 0.5, 2)
        (2.0, 1.0)
    """
    return (direct / threads) / (gemm / threads + copy)


def measure(probe: tuple[int, int] = PROBE, candidates: tuple[int, ...] = CANDIDATES) -> dict:
    """``predicted_ratio`` of a float32 ``(rows, K) @ (K, N)`` with a column-major right
    operand, per row count: the direct product, the transposed one and its copy to a C-ordered
    result (as ``gemm.matmul`` makes it) timed on one BLAS thread (~0.1 s at the defaults).

    Example:
        >>> sorted(measure((8, 16), (1, 4)))
        [1, 4]
    """
    k, n = probe
    rng = np.random.default_rng(0)
    w = rng.standard_normal((n, k), dtype=np.float32)
    ratios = {}
    with one_blas_thread() as threads:
        for rows in candidates:
            x = rng.standard_normal((rows, k), dtype=np.float32)
            product = np.matmul(w, x.T)
            direct, gemm, copy = best_of(
                (
                    functools.partial(np.matmul, x, w.T),
                    functools.partial(np.matmul, w, x.T),
                    functools.partial(np.ascontiguousarray, product.T),
                ),
                REPEATS,
            )
            ratios[rows] = predicted_ratio(direct, gemm, copy, threads)
    return ratios


def _read(record: object) -> int | None:
    """The row count of a cache record, or None when it is not one (measured again)."""
    value = record["rows"] if isinstance(record, dict) else None
    return value if isinstance(value, int) and value >= 0 else None


def _record() -> dict:
    ratios = measure()  # the ratios too: what a reader of the cache can check the count against
    return {
        "rows": choose(ratios),
        "probe": PROBE,
        "ratios": {str(r): q for r, q in ratios.items()},
    }


DEFAULT = 64
"""The count under ``DUALFLOW_MACHINE_CONSTANTS=defaults`` (the constant it replaced)."""
_ROWS = PerMachine("thin_rows", lambda: _record(), _read, DEFAULT)


def thin_rows() -> int:
    """This machine's row count (``choose`` of ``measure``): read from the kernels cache, or
    measured and written there at the first call of a machine (measured in every process when
    the cache cannot be used; ``DEFAULT`` under ``DUALFLOW_MACHINE_CONSTANTS=defaults``). Fixed
    for the process once read, so its products route alike (``per_machine.PerMachine``).

    Example:
        >>> thin_rows() in (0, DEFAULT, *CANDIDATES)
        True
    """
    return _ROWS.get()


def forget() -> None:
    """Drop this process's count: the next ``thin_rows`` reads (or measures) it again (tests).

    Example:
        >>> before = thin_rows(); forget(); thin_rows() == before
        True
    """
    _ROWS.forget()
