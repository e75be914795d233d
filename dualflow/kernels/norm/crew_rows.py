"""Norm kernels' row, block or channel ranges split over the native crew, where its split pays.

``cpu_threads``' workers take a part through a lock and the GIL: each hand-off costs 57-95 us
on a KVM guest whose idle CPUs halt, so the machine's ``part_min`` (~262K elements a part
there) kept a layer norm over a transformer's (1024, 256) activations on one thread (0.2 ms
forward, 0.4 ms backward, eight calls a step). The native crew's workers take a part in a few
microseconds while they linger (``native_split``'s model decides, as for flat fused kernels).
A kernel module gives an entry point (its kernel over ``[block[LO], block[HI])`` of arrays whose
addresses and sizes follow in the block, ``crew_ranges``), built, like the block, only by a call
that splits; each row is one part's alone, so the results never depend on the split.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dualflow.kernels.base import crew_ranges, numba_cache
from dualflow.kernels.base.machine_constants import machine_constants
from dualflow.kernels.numba import native_split
from dualflow.kernels.numba.numba_elementwise import _model_module

WORK = 6.0
"""A row kernel's time an element in copies of one (``native_split``'s unit): a layer norm reads
a row three times and rounds ~6 operations an element (measured: 0.84 ns an element forward,
0.75 a moved element backward, against 0.09 for the crew model's in-cache negation). With a
copy's work the model took a sleeping crew's wake-up as repaid only from 2 x 262K elements."""
READ_ONCE = 1.0
"""The work of a kernel that reads its input once and writes little (a bias gradient's sums)."""


def run(
    table: dict,
    dtype: np.dtype,
    build: Callable[[np.dtype], Any],
    operands: Callable[[], Sequence[Any]],
    count: int,
    moved: int,
    work: float = WORK,
) -> bool:
    """``[0, count)`` of a kernel split over the crew, where ``moved`` elements of ``work``
    copies' time each repay the split (``native_split.splits``); False (nothing ran) where they
    do not, or the crew is taken: the caller runs it another way. Only a call that splits
    builds the entry (``build(dtype)``, once per process into ``table``) and its block:
    ``operands()``' items after ``LO``/``HI``, an array standing for its address (kept alive
    until the parts are done), an int for itself.

    Example:
        >>> run({}, np.dtype(np.float32), None, tuple, 1, 1)  # one element never splits
        False
    """
    if count < 2:
        return False
    crew = native_split.splits(moved, work, machine_constants().part_min_for(work), _model_module)
    if crew is None:
        return False
    entry_at = entry_point(table, dtype, build(dtype))
    items = operands()
    words = [a.ctypes.data if isinstance(a, np.ndarray) else a for a in items]
    return crew_ranges.run(crew, entry_at, np.array([0, count, *words], np.int64))


def entry_point(table: dict, dtype: np.dtype, build: Callable[[], tuple[Any, str]]) -> int:
    """The address of the entry ``build()`` compiles (``(dispatcher, stem)``) for ``dtype``,
    built once per process into ``table`` (its machine code in the signed kernels store).

    Example:
        >>> from dualflow.kernels.norm import layer_norm
        >>> entry_point({}, np.dtype(np.float32), layer_norm._entry_build(np.dtype(np.float32))) > 0
        True
    """
    return crew_ranges.entry_at(numba_cache.built_once(table, dtype, build))
