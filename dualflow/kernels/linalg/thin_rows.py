"""How many rows ``x`` of ``x @ W.T`` (a few rows times a column-major matrix) may have for the
product to run faster transposed, ``(W @ x.T).T``: measured on this machine (its BLAS on one
thread, scaled to its thread count by a model), once, and kept in the kernels cache, so every
process on the machine routes alike.

OpenBLAS picks its kernels by the operands' layout and the CPU: on one AVX-512 Zen 4 the direct
form of a 16 x 256 x 1024 float32 product ran at half the transposed one's rate, and where the
two meet depends on the machine. A constant tuned there (64 rows) was a guess everywhere else.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import platform
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from dualflow.background import blas
from dualflow.background.process import NO_BLAS_THREADS
from dualflow.disk_cache import open_store

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


def _best_of(calls: tuple[Callable[[], object], ...]) -> list[float]:
    """The fastest of ``REPEATS`` timed calls of each, taken in turn (a load change hits all)."""
    for call in calls:  # one untimed call each: caches warm
        call()
    best = [math.inf] * len(calls)
    for _ in range(REPEATS):
        for k, call in enumerate(calls):
            start = time.perf_counter()
            call()
            best[k] = min(best[k], time.perf_counter() - start)
    return best


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[int]:
    """OpenBLAS on one thread inside; yields the thread count the model scales to (the count
    from before, or 1 when it cannot be changed safely: another thread may be in a BLAS call,
    or numpy's BLAS is not OpenBLAS; then the probe times what runs)."""
    before = blas.get_threads()
    others = [
        t
        for t in threading.enumerate()
        if t is not threading.current_thread() and not t.name.startswith(NO_BLAS_THREADS)
    ]
    if before is None or before == 1 or others or not blas.set_threads(1):
        yield 1
        return
    try:
        yield before
    finally:
        blas.set_threads(before)


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
    with _one_blas_thread() as threads:
        for rows in candidates:
            x = rng.standard_normal((rows, k), dtype=np.float32)
            product = np.matmul(w, x.T)
            direct, gemm, copy = _best_of(
                (
                    functools.partial(np.matmul, x, w.T),
                    functools.partial(np.matmul, w, x.T),
                    functools.partial(np.ascontiguousarray, product.T),
                )
            )
            ratios[rows] = predicted_ratio(direct, gemm, copy, threads)
    return ratios


def machine_key() -> str:
    """What the choice depends on, hashed: the CPU (model, architecture, CPUs this process may
    use), numpy and its BLAS (library, threads). A change of any is a new measurement.

    Example:
        >>> len(machine_key())
        16
    """
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        model = next((line for line in lines if line.startswith("model name")), "")
    except OSError:
        model = platform.processor()
    lib = blas.library()
    facts = [
        model,
        platform.machine(),
        str(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()),
        np.__version__,
        "" if lib is None else str(getattr(lib, "_name", "")),
        str(blas.get_threads()),
    ]
    return hashlib.sha256("\n".join(facts).encode()).hexdigest()[:16]


def _load(store: object, name: str) -> int | None:
    payload = None if store is None else store.load(name)
    try:
        value = json.loads(payload)["rows"] if payload else None
    except (ValueError, KeyError, TypeError):
        return None
    return value if isinstance(value, int) and value >= 0 else None


_CHOSEN: list[int] = []  # this process's count, once read or measured
_LOCK = threading.Lock()  # threads that need it at once (loopback ranks) wait for one answer


def thin_rows() -> int:
    """This machine's row count (``choose`` of ``measure``): read from the kernels cache, or
    measured and written there at the first call of a machine (measured in every process when
    the cache cannot be used). Fixed for the process once read, so its products route alike.

    Example:
        >>> thin_rows() in (0, *CANDIDATES)
        True
    """
    if not _CHOSEN:
        with _LOCK:
            if not _CHOSEN:
                _CHOSEN.append(_read_or_measure())
    return _CHOSEN[0]


def forget() -> None:
    """Drop this process's count: the next ``thin_rows`` reads (or measures) it again (tests).

    Example:
        >>> before = thin_rows(); forget(); thin_rows() == before
        True
    """
    with _LOCK:
        _CHOSEN.clear()


def _read_or_measure() -> int:
    store = open_store("kernels")
    name = f"thin_rows_{machine_key()}.json"
    cached = _load(store, name)
    if cached is not None:
        return cached
    ratios = measure()
    rows = choose(ratios)
    if store is not None:  # the ratios too: what a reader of the cache can check it against
        record = {"rows": rows, "probe": PROBE, "ratios": {str(r): q for r, q in ratios.items()}}
        store.save(name, json.dumps(record).encode())
    return rows
