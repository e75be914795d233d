"""Which of OpenBLAS's kernel tables runs this process's GEMMs: the one its float32 GEMMs
measured fastest on this machine, chosen once per machine (``PerMachine``) and switched to when
dualflow is imported, before it computes anything (so every eager and compiled call of the
process rounds alike).

OpenBLAS picks its table by the CPU's model when it loads; on a Zen 4 it takes SkylakeX, whose
float32 GEMMs ran 3-44% slower there than its Haswell table's (design notes, "OpenBLAS's kernels
chosen by measurement"). The probe times a few training-shaped float32 GEMMs on one BLAS thread
with each table the CPU can run (``blas_cores.cores``), interleaved, and keeps OpenBLAS's own
pick unless another is faster by ``MIN_GAIN`` on average. A user's ``OPENBLAS_CORETYPE`` is their
choice and is kept, as is OpenBLAS's pick under ``DUALFLOW_MACHINE_CONSTANTS=defaults``.
"""

from __future__ import annotations

import functools
import math
import os
import time
from dataclasses import dataclass

import numpy as np

from dualflow.background import blas_cores
from dualflow.background.process import blas_callers
from dualflow.disk_cache import open_store
from dualflow.errors import ConfigError
from dualflow.kernels.base.per_machine import PerMachine, defaults_fixed, one_blas_thread

SHAPES = (
    (64, 784, 1000, "NN"),
    (1000, 64, 1000, "TN"),
    (16, 256, 1024, "NN"),
    (64, 8192, 288, "NT"),
    (8192, 288, 64, "NN"),
    (384, 384, 384, "NN"),
)
"""float32 GEMMs (M, K, N, which operands are read transposed): a small-batch layer and its
weight gradient (K = the batch), a recurrence's step (16 rows), a convolution's weight gradient
(K = the pixels) and its forward over im2col columns, and a square one; 0.1-3 ms each on one
core, in the layouts the plans' GEMMs read them (OpenBLAS packs each layout differently)."""
REPEATS = 4
MIN_GAIN = 0.03
"""The least mean saving over ``SHAPES`` for which another table replaces OpenBLAS's pick:
below it the difference is within the probe's noise, and the library's own choice stands."""


def _product(m: int, k: int, n: int, layout: str) -> functools.partial:
    """One GEMM of ``SHAPES``, its operands read transposed where ``layout`` says "T"."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((k, m) if layout[0] == "T" else (m, k), dtype=np.float32)
    b = rng.standard_normal((n, k) if layout[1] == "T" else (k, n), dtype=np.float32)
    a, b = (a.T if layout[0] == "T" else a), (b.T if layout[1] == "T" else b)
    return functools.partial(np.matmul, a, b, out=np.empty((m, n), np.float32))


def measure() -> dict:
    """Time ``SHAPES`` with each table this CPU can run, on one BLAS thread (the fastest of
    ``REPEATS`` interleaved rounds, seconds per shape), and switch back to the table that ran
    before.

    Example:
        >>> record = measure()
        >>> record["loaded"] == blas_cores.core_name(), sorted(record["seconds"]) == sorted(
        ...     blas_cores.cores())
        (True, True)
    """
    loaded, names = blas_cores.core_name(), blas_cores.cores()
    products = [_product(*shape) for shape in SHAPES]
    seconds = {name: [math.inf] * len(SHAPES) for name in names}
    try:
        with one_blas_thread():
            for repeat in range(REPEATS + 1):  # the first round warms each table's caches
                for name in names:
                    blas_cores.use_core(name)
                    times = [_seconds(product) for product in products]
                    if repeat:
                        seconds[name] = [min(a, b) for a, b in zip(seconds[name], times)]
    finally:
        if loaded in names:
            blas_cores.use_core(loaded)
    return {"loaded": loaded, "shapes": [list(s) for s in SHAPES], "seconds": seconds}


def _seconds(product: functools.partial) -> float:
    start = time.perf_counter()
    product()
    return time.perf_counter() - start


@dataclass(frozen=True)
class Choice:
    """A probe's outcome: the ``core`` to run, OpenBLAS's own pick (``loaded``) and the chosen
    table's mean time over the shapes relative to the loaded one's (``ratio``)."""

    core: str
    loaded: str
    ratio: float = 1.0

    def describe(self) -> str:
        """One line for the bench and ``explain``.

        Example:
            >>> Choice("Haswell", "SkylakeX", 0.93).describe()
            "OpenBLAS kernels: Haswell (0.93x the GEMM time of OpenBLAS's pick, SkylakeX)"
            >>> Choice("SkylakeX", "SkylakeX").describe()
            "OpenBLAS kernels: SkylakeX (OpenBLAS's pick)"
        """
        if self.core == self.loaded:
            return f"OpenBLAS kernels: {self.core} (OpenBLAS's pick)"
        return (
            f"OpenBLAS kernels: {self.core} ({self.ratio:.2f}x the GEMM time of OpenBLAS's pick,"
            f" {self.loaded})"
        )


def choose(record: dict) -> Choice:
    """The table a probe's ``record`` picks: the one with the least mean time relative to the
    loaded table's over the shapes, when that mean is below ``1 - MIN_GAIN``; else the loaded.

    Example:
        >>> choose({"loaded": "A", "seconds": {"A": [1.0, 2.0], "B": [0.9, 1.9]}}).core
        'B'
        >>> choose({"loaded": "A", "seconds": {"A": [1.0, 2.0], "B": [0.9, 2.2]}}).core
        'A'
    """
    loaded, seconds = record["loaded"], record["seconds"]
    base = seconds[loaded]

    def mean_ratio(name: str) -> float:
        return sum(t / b for t, b in zip(seconds[name], base, strict=True)) / len(base)

    best = min(seconds, key=mean_ratio)
    if mean_ratio(best) > 1.0 - MIN_GAIN:
        return Choice(loaded, loaded)
    return Choice(best, loaded, mean_ratio(best))


def _read(record: object) -> Choice | None:
    """The choice of a cache record, or None when it is not a probe of this library's tables
    as they load here (then the probe runs again)."""
    if not isinstance(record, dict) or record.get("loaded") != blas_cores.core_name():
        return None
    seconds, names = record.get("seconds"), blas_cores.cores()
    if record.get("shapes") != [list(s) for s in SHAPES] or not isinstance(seconds, dict):
        return None
    if set(seconds) != set(names):
        return None
    for times in seconds.values():
        if not isinstance(times, list) or len(times) != len(SHAPES):
            return None
        if not all(isinstance(t, float) and 0.0 < t < math.inf for t in times):
            return None
    return choose(record)


_CHOICE = PerMachine("blas_core", measure, _read, Choice("", ""))


def apply() -> str | None:
    """Switch OpenBLAS to this machine's measured table (once a process, at dualflow's import);
    the table that runs afterwards, or None where nothing is switched: no switchable OpenBLAS or
    only one table, a user's ``OPENBLAS_CORETYPE``, or another thread that may be in a BLAS
    call. OpenBLAS's own pick also stays under ``DUALFLOW_MACHINE_CONSTANTS=defaults``, without a
    usable kernels cache, and where a setting is invalid (its error comes at its first use).

    Example:
        >>> apply() in (None, blas_cores.core_name())
        True
    """
    if blas_cores.CORE_ENV in os.environ or len(blas_cores.cores()) < 2 or blas_callers():
        return None
    try:
        if defaults_fixed() or open_store("kernels") is None:
            # without a shared record each process would measure at every import, and two
            # processes could pick different tables by noise and round differently
            return None
        measured = _CHOICE.get()
    except ConfigError:  # a bad setting: reported where it is used, not by ``import dualflow``
        return None
    if measured.core and measured.core != blas_cores.core_name():
        blas_cores.use_core(measured.core)
    _applied[:] = [measured] if measured.core else []
    return blas_cores.core_name()


_applied: list[Choice] = []  # the measured choice ``apply`` made, once it made one


def choice() -> Choice:
    """The choice ``apply`` made in this process; OpenBLAS's running table as its own pick where
    ``apply`` measured nothing (its reasons there).

    Example:
        >>> choice().core == (blas_cores.core_name() or "")
        True
    """
    if _applied:
        return _applied[0]
    name = blas_cores.core_name() or ""
    return Choice(name, name)
