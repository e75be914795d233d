"""Output arrays a plan writes again: the last runs' large outputs that nobody references any more.

A plan's large outputs get arrays of their own at every run; writing a fresh array first faults
in and zeroes its pages (~0.4 ms for 16 MB), so an output the caller has dropped, with every view
of it, is written again instead. Reference counts decide: anything still reachable keeps its
array, exactly as if it had been freed and allocated again.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

# Runs whose outputs a plan may write again: with ``y = f(x)`` in a loop the last run's output is
# still held during the call, the one before is free (the two alternate).
RECYCLED_RUNS = 2


def run_outputs(xp: Any, values: tuple, spare: list[Any] | None) -> list[Any]:
    """One array per output value (shape and dtype) for this run: a dropped one of the last
    ``RECYCLED_RUNS`` runs from ``spare`` where there is one, else a new one. ``spare`` (kept
    by the plan; None: no recycling) is refilled with this run's arrays and the last run's
    untaken ones.

    Example:
        >>> import numpy as np
        >>> from types import SimpleNamespace
        >>> value, spare = SimpleNamespace(shape=(2,), dtype="float32"), []
        >>> first = run_outputs(np, (value,), spare)[0]
        >>> first_id = id(first)
        >>> del first
        >>> id(run_outputs(np, (value,), spare)[0]) == first_id
        True
    """
    count = len(values)
    kept = spare if spare is not None and len(spare) == RECYCLED_RUNS * count else []
    arrays, untaken = [], []
    for k, v in enumerate(values):
        array, last = _take_unreferenced(kept, range(k, len(kept), count))
        arrays.append(xp.empty(v.shape, v.dtype) if array is None else array)
        untaken.append(last)
    if spare is not None:
        spare[:] = [*arrays, *untaken]
    return arrays


def _take_unreferenced(kept: list[Any], slots: range) -> tuple[Any, Any]:
    """(the first array of ``kept[slots]`` nobody else references, or None; the last run's
    array when it was not taken, else None). Taken and dropped arrays leave the list.

    Any view keeps its base alive and counts, and so does a Tensor wrapping it; memory nobody
    references is free to overwrite, as it would be after being freed and allocated again. A
    weak reference does not count in ``getrefcount`` but would see the new values, so an array
    anyone holds one to is never taken (it only lives on until the plan lets it go), nor one the
    caller made read-only before dropping it (the steps' ``out=`` writes would fail).
    """
    taken, last = None, None
    for n, slot in enumerate(slots):
        array = kept[slot]
        kept[slot] = None
        # references: the local name and getrefcount's argument
        if (
            taken is None
            and array is not None
            and sys.getrefcount(array) == 2
            and not weakref.getweakrefcount(array)
            and array.flags.writeable  # the caller may have locked it before dropping it
        ):
            taken = array
        elif n == 0:
            last = array  # still held by the caller (``y = f(x)`` in a loop): a later candidate
    return taken, last


def unreferenced_bytes(kept: list[Any]) -> int:
    """Bytes of the arrays in ``kept`` that nothing else references (``run_outputs``' spares).

    Example:
        >>> import numpy as np
        >>> kept = [np.zeros(4), np.zeros(2)]
        >>> other = kept[1]
        >>> unreferenced_bytes(kept)
        32
    """
    # references while counted: the list, the loop name and getrefcount's argument
    return sum(a.nbytes for a in kept if a is not None and sys.getrefcount(a) == 3)
