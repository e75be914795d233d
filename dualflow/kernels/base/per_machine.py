"""Values measured once per machine: read from the signed kernels cache under a key of the
machine, else measured now, written there and kept for the process, so every process on the
machine decides alike (``PerMachine``). ``DUALFLOW_MACHINE_CONSTANTS=defaults`` gives every such
value its default instead (the test suite sets it: its results then never depend on the machine).

The timing helpers the probes share live here too: the fastest of interleaved repeats (a load
change hits every candidate alike, and load only ever slows a run down) and OpenBLAS on one
thread (multi-thread timings wait whole scheduler ticks on a busy machine; probes time one
thread and scale by a model).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import platform
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

from dualflow.background import blas, blas_cores
from dualflow.background.process import blas_callers
from dualflow.disk_cache import open_store
from dualflow.errors import ConfigError

ENV = "DUALFLOW_MACHINE_CONSTANTS"
"""Set to ``defaults``: no measurement, every per-machine value is its default (tests, and
anyone who wants one machine's plans on another); ``measured`` or unset: measured."""

T = TypeVar("T")


def defaults_fixed() -> bool:
    """Whether ``DUALFLOW_MACHINE_CONSTANTS=defaults`` is set (``measured`` or unset: not);
    read when a value is resolved.

    Raises:
        ConfigError: it holds anything else.

    Example:
        >>> import os
        >>> defaults_fixed() == (os.environ.get(ENV, "").strip().lower() == "defaults")
        True
    """
    text = os.environ.get(ENV, "")
    value = text.strip().lower()
    if value not in ("defaults", "measured", ""):
        raise ConfigError(f"{ENV}={text!r} is not a choice: use defaults or measured (or unset it)")
    return value == "defaults"


def machine_key(*extra: object) -> str:
    """What a measured value depends on, hashed: the CPU (model, architecture, CPUs this process
    may use), numpy and its BLAS (library, threads, kernel table), and ``extra`` facts of the
    caller. A change of any is a new measurement.

    Example:
        >>> len(machine_key()), machine_key() == machine_key(2)
        (16, False)
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
        str(blas_cores.core_name()),
        *map(str, extra),
    ]
    return hashlib.sha256("\n".join(facts).encode()).hexdigest()[:16]


def best_of(calls: tuple[Callable[[], object], ...], repeats: int) -> list[float]:
    """The fastest of ``repeats`` timed calls of each (seconds), taken in turn after one untimed
    call each (caches warm).

    Example:
        >>> [t >= 0 for t in best_of((lambda: None, lambda: None), 2)]
        [True, True]
    """
    for call in calls:
        call()
    best = [math.inf] * len(calls)
    for _ in range(repeats):
        for k, call in enumerate(calls):
            start = time.perf_counter()
            call()
            best[k] = min(best[k], time.perf_counter() - start)
    return best


def least_seconds(call: Any, calls: int, pause: float = 0.0) -> float:
    """The least wall time of ``calls`` runs of ``call()``, each after ``pause`` seconds of this
    thread kept busy (as a plan's caller is between kernel calls: the crew's workers stop
    lingering and sleep, while this CPU stays awake). The split models' timer.

    Example:
        >>> 0.0 <= least_seconds(lambda: None, 3) < 1.0
        True
    """
    best = float("inf")
    for _ in range(calls):
        start = time.perf_counter()
        while time.perf_counter() - start < pause:
            pass
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def timings_of(record: object, fields: Iterable[str]) -> dict | None:
    """A cache record's ``timings``: a dict of exactly ``fields``, each a positive number; None
    when the record is anything else (then the value is measured again). Finite: a JSON
    ``Infinity`` is no timing.

    Example:
        >>> timings_of({"timings": {"a": 1e-3}}, ["a"]), timings_of({"timings": {"a": -1}}, ["a"])
        ({'a': 0.001}, None)
    """
    timings = record.get("timings") if isinstance(record, dict) else None
    if not isinstance(timings, dict) or set(timings) != set(fields):
        return None
    if not all(type(v) in (int, float) and 0 < v < math.inf for v in timings.values()):
        return None
    return timings


@contextlib.contextmanager
def one_blas_thread() -> Iterator[int]:
    """OpenBLAS on one thread inside; yields the thread count a model scales to (the count from
    before, or 1 when it cannot be changed safely: another thread may be in a BLAS call, or
    numpy's BLAS is not OpenBLAS; then the probe times what runs).

    Example:
        >>> with one_blas_thread() as count:
        ...     count >= 1
        True
    """
    before = blas.get_threads()
    if before is None or before == 1 or blas_callers() or not blas.set_threads(1):
        yield 1
        return
    try:
        yield before
    finally:
        blas.set_threads(before)


class PerMachine(Generic[T]):
    """One value measured once per machine: ``measure()`` makes a JSON-able record (what was
    timed, so a reader of the cache can check the value against it), ``read(record)`` gives the
    value from a record or None when the record is not one (then it is measured again).
    ``key_facts()`` adds facts beyond ``machine_key``'s; ``keep(record)`` False: a measurement
    made in a disturbed context, used by this process only. Threads asking at once get one
    answer.

    Example:
        >>> keep = lambda record: False  # an example: nothing is written to the cache
        >>> value = PerMachine("doctest_value", lambda: {"v": 3}, lambda r: r["v"], 1, keep=keep)
        >>> value.get() in (1, 3)  # 1 under DUALFLOW_MACHINE_CONSTANTS=defaults
        True
    """

    def __init__(
        self,
        name: str,
        measure: Callable[[], dict],
        read: Callable[[Any], T | None],
        default: T,
        key_facts: Callable[[], tuple] = tuple,
        keep: Callable[[dict], bool] = lambda record: True,
    ) -> None:
        self.name, self.measure, self.read, self.default = name, measure, read, default
        self.key_facts, self.keep = key_facts, keep
        self._value: list[T] = []  # this process's value, once read or measured
        self._lock = threading.Lock()

    def get(self) -> T:
        """The value: fixed for the process once read, so its calls decide alike."""
        if not self._value:
            with self._lock:
                if not self._value:
                    self._value.append(self._resolve())
        return self._value[0]

    def forget(self) -> None:
        """Drop this process's value: the next ``get`` reads (or measures) it again (tests)."""
        with self._lock:
            self._value.clear()

    def entry_name(self) -> str:
        """The value's file name in the kernels cache."""
        return f"{self.name}_{machine_key(*self.key_facts())}.json"

    def _parse(self, payload: bytes | None) -> T | None:
        try:
            return None if payload is None else self.read(json.loads(payload))
        except (ValueError, KeyError, TypeError):
            return None

    def _resolve(self) -> T:
        if defaults_fixed():
            return self.default
        store = open_store("kernels")
        name = self.entry_name()
        cached = None if store is None else self._parse(store.load(name))
        if cached is not None:
            return cached
        record = self.measure()
        value = self.read(record)
        if store is not None and self.keep(record):
            store.save(name, json.dumps(record).encode())
        return self.default if value is None else value
