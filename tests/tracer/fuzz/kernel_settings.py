"""The process settings a spec's kernel dimensions run under (``Spec.blas_table``, ``tiles``,
``wide``, ``crew``, ``chain``): each a context manager that changes a routing decision for eager's
calls and the plans' alike, and restores it after; ``kernel_settings(spec)`` enters them all.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from dualflow.background import blas_cores
from dualflow.background.workers import IN_WORKER
from dualflow.kernels.base import native_crew
from dualflow.kernels.linalg import thin_gemm
from dualflow.kernels.numba import kernel_chain, native_split, numba_elementwise
from tests.tracer.fuzz.spec import Spec


@contextlib.contextmanager
def kernel_settings(spec: Spec) -> Iterator[None]:
    """Every setting of ``spec``'s kernel dimensions, inside.

    Example:
        >>> with kernel_settings(Spec(1, chain=True)):
        ...     kernel_chain.COMPILE_AFTER
        0
    """
    settings = (blas_table(spec.blas_table), thin_tiles(spec.tiles), wide_vectors(spec.wide))
    with contextlib.ExitStack() as stack:
        for setting in (*settings, crew_splits(spec.crew), chained(spec.chain)):
            stack.enter_context(setting)
        yield


@contextlib.contextmanager
def _replaced(owner: Any, names: dict[str, Any], on: bool) -> Iterator[None]:
    """Inside, when ``on``: ``owner``'s attributes ``names`` set to their values; the old ones
    back after."""
    if not on:
        yield
        return
    saved = {name: getattr(owner, name) for name in names}
    for name, value in names.items():
        setattr(owner, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(owner, name, value)


def wide_vectors(on: bool) -> contextlib.AbstractContextManager:
    """Inside, when ``on``: every flat fused kernel rendered loops at the widest vectors,
    memory-bound ones too (new kernel sources: compiled afresh, eager's and the plans')."""
    return _replaced(numba_elementwise, {"compute_bound": lambda program: True}, on)


def chained(on: bool) -> contextlib.AbstractContextManager:
    """Inside, when ``on``: a plan's runs of small fused steps run as one native call from
    their first call, their entries compiled here (``kernel_chain.COMPILE_AFTER`` 0)."""
    return _replaced(kernel_chain, {"COMPILE_AFTER": 0}, on)


def _always_split(size: int, work: float, part_min: int, model: Any) -> Any:
    # ``native_split.splits`` where every call that can split does
    if size < 2 or getattr(IN_WORKER, "active", False):
        return None
    return native_crew.crew()


def crew_splits(on: bool) -> contextlib.AbstractContextManager:
    """Inside, when ``on``: every call that asks ``native_split.splits`` whether to split over
    the native crew (flat fused kernels, Adam, the norm kernels) splits where a crew runs and
    the call is not inside another's part, whatever its size: eager's calls and the plans'."""
    return _replaced(native_split, {"splits": _always_split}, on)


def thin_tiles(on: bool) -> contextlib.AbstractContextManager:
    """Inside, when ``on``: every few-row ``x @ W.T`` (up to ``4 * LANES`` rows, any K and N)
    runs on ``thin_gemm``'s register tiles, eager and compiled alike."""
    rows = 4 * thin_gemm.LANES
    limits = {"row_limit": lambda k: rows, "max_rows": lambda: rows, "MIN_SIDE": 1}
    return _replaced(thin_gemm, limits, on)


@contextlib.contextmanager
def blas_table(index: int) -> Iterator[None]:
    """OpenBLAS's ``index``-th table this CPU can run (``blas_cores.cores()``, 0: the running
    one) inside; the running one back after."""
    tables = blas_cores.cores()
    if index == 0 or len(tables) < 2:
        yield
        return
    before = blas_cores.core_name()
    assert blas_cores.use_core(tables[index % len(tables)])
    try:
        yield
    finally:
        blas_cores.use_core(before)
