"""Rows where compiling made a step slower: a compiled mode slower than eager, or a mode that ran
passes slower than ``compiled-O0`` (no passes), beyond what the rows' own timings call noise.

Issue 38's goal "no workload compiled slower than O0 or than eager": the bench cannot decide for
the pass pipeline, but it names every row that breaks the goal, in the table's note column, in
``bench.json`` (``Measurement.slower``) and in a line under the table. Cells run one after
another, so a flag is checked again with the steps timed in turn (``confirm``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from dualflow.bench.harness import Measurement

SLOWER_MARGIN = 0.02
"""A row is slower than another when even its fastest call took longer than the other's median
call by more than this fraction: a few slow calls (another process took the cores) cannot make
that so, and two rows of one speed with tight timings do not trip it by a hair."""

PLAIN = "compiled-O0"  # the compiled mode without passes


def slower_by(row: Measurement, other: Measurement) -> float | None:
    """``row``'s median over ``other``'s when ``row`` is slower beyond noise, else None.

    Example:
        >>> o0 = Measurement("w", "compiled-O0", 88.8, 87.0, 92.0, 10, 0)
        >>> slower_by(Measurement("w", "compiled", 96.5, 94.0, 99.0, 10, 0), o0)
        1.087
        >>> slower_by(Measurement("w", "compiled", 96.5, 80.0, 130.0, 10, 0), o0) is None
        True
    """
    if not (row.repeats and other.repeats) or other.ms_median <= 0:
        return None
    if row.ms_min <= other.ms_median * (1 + SLOWER_MARGIN):
        return None
    return round(row.ms_median / other.ms_median, 3)


def references(mode: str) -> tuple[str, ...]:
    """The modes a ``mode`` row must not be slower than: eager for every compiled mode, and
    ``compiled-O0`` too for modes that run passes on the same plans (``compiled``,
    ``compiled[...]``; lazy re-execution also runs the step's Python at every call).

    Example:
        >>> references("compiled"), references("compiled-lazy"), references("eager")
        (('eager', 'compiled-O0'), ('eager',), ())
    """
    if not mode.startswith("compiled"):
        return ()
    if mode == "compiled" or mode.startswith("compiled["):
        return ("eager", PLAIN)
    return ("eager",)


def flag_slower(rows: list[Measurement]) -> list[tuple[Measurement, list[Measurement]]]:
    """Set ``slower`` on every row slower than one of its ``references`` of the same workload
    (e.g. ``"compiled-O0 1.09x"``); returns each flagged row with the rows it is slower than.

    Example:
        >>> rows = [Measurement("w", "eager", 90.0, 89.0, 93.0, 10, 0),
        ...         Measurement("w", "compiled-O0", 88.8, 87.0, 92.0, 10, 0),
        ...         Measurement("w", "compiled", 96.5, 94.0, 99.0, 10, 0)]
        >>> [(r.slower, len(than)) for r, than in flag_slower(rows)]
        [('eager 1.07x, compiled-O0 1.09x', 2)]
    """
    by_cell = {(r.workload, r.mode): r for r in rows}
    flagged = []
    for row in rows:
        than = [by_cell.get((row.workload, mode)) for mode in references(row.mode)]
        than = [other for other in than if other is not None and slower_by(row, other)]
        row.slower = _describe(row, than)
        if than:
            flagged.append((row, than))
    return flagged


def _describe(row: Measurement, than: list[Measurement]) -> str | None:
    return ", ".join(f"{o.mode} {slower_by(row, o):.2f}x" for o in than) or None


def _alternated(name: str, steps: dict[str, Callable[[], Any]], repeats: int) -> dict:
    """Rows of ``steps`` timed call by call in turn (``repeats`` calls each)."""
    times: dict[str, list[float]] = {mode: [] for mode in steps}
    for _ in range(repeats):
        for mode, step in steps.items():
            start = time.perf_counter()
            step()
            times[mode].append((time.perf_counter() - start) * 1e3)
    return {mode: Measurement.of_times(name, mode, t, 0) for mode, t in times.items()}


def confirm(
    flagged: list[tuple[Measurement, list[Measurement]]],
    make: Callable[[str, str], Callable[[], Any]],
    repeats: Callable[[str], int],
) -> None:
    """Time each flagged row's step and the steps it was slower than again, alternating call
    by call: the table's cells run one after another, so a change in the machine's load between
    two cells looks like a slower mode. ``make(workload, mode)`` builds a warmed-up step. A flag
    the alternated timings repeat stays (with their ratio); one they do not becomes a note.

    Example:
        >>> fast, slow = Measurement("w", "eager", 1.0, 1.0, 1.0, 3, 0), Measurement(
        ...     "w", "compiled", 1.5, 1.5, 1.5, 3, 0, slower="eager 1.50x")
        >>> steps = {"eager": lambda: time.sleep(0.002), "compiled": lambda: None}
        >>> confirm([(slow, [fast])], lambda w, m: steps[m], lambda w: 3)
        >>> slow.slower, slow.note
        (None, 'slower than eager in its cell, not when timed alternately (load drift)')
    """
    for row, than in flagged:
        modes = [row.mode, *(other.mode for other in than)]
        again = _alternated(
            row.workload, {m: make(row.workload, m) for m in modes}, repeats(row.workload)
        )
        still = [o for o in than if slower_by(again[row.mode], again[o.mode])]
        gone = [o.mode for o in than if o not in still]
        row.slower = _describe(again[row.mode], [again[o.mode] for o in still])
        if gone:
            said = f"slower than {', '.join(gone)} in its cell, not when timed alternately"
            row.note = "; ".join(n for n in (row.note, f"{said} (load drift)") if n)


def summary(rows: list[Measurement]) -> str:
    """The line under the table: which rows compiled slower, or that none did.

    Example:
        >>> summary([])
        'compiled no slower than eager or compiled-O0 beyond noise in any row'
        >>> row = Measurement("w", "compiled", 1.0, 1.0, 1.0, 3, 0, slower="compiled-O0 1.10x")
        >>> summary([row])
        'SLOWER beyond noise: w compiled (than compiled-O0 1.10x)'
    """
    flagged = [r for r in rows if r.slower]
    if not flagged:
        return "compiled no slower than eager or compiled-O0 beyond noise in any row"
    cells = "; ".join(f"{r.workload} {r.mode} (than {r.slower})" for r in flagged)
    return f"SLOWER beyond noise: {cells}"
