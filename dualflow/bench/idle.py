"""Busy-machine checks of the bench: an idle gate before each cell and the spread verdict.

Before a cell ``wait_until_idle`` samples how much CPU other processes use (over a short sleep,
from /proc/stat; the 1-minute load average per core where that is missing) and waits up to a limit
for it to settle. After the run ``mark_busy`` flags rows whose ``(p90 - p10) / median`` over the
repeats exceeds a threshold, and ``verdict`` says whether the run counts.

Each cell also records ``others_during``, the share of the CPUs that other processes (the
compile worker, another guest of the host) took while its calls were timed; a cell where that
reaches ``OTHERS_LIMIT`` is disturbed however narrow its spread, and is measured again. So is a
cell around whose timed calls two CPUs shared one core's arithmetic (``cores_shared``, from
``core_sharing``: a host placing both vCPUs of a guest on one core), which no CPU counter shows.

A peer's cell can spread wide on an idle machine: JAX's jitted tiny-ops step runs in phases of
0.03-0.05 ms and of 0.15 ms calls while no other process uses the CPUs (its own runtime's
threads). Such a cell is not a disturbed one, and no re-measuring narrows it, so
``varies_alone`` tells it apart: a peer's cell that stayed wide in every attempt, the one kept
(the least disturbed) run while other processes used less than ``OTHERS_LIMIT`` of the CPUs
(``others_during``). It does not stop a run from counting; the goals judge dualflow against
such a peer's 10th percentile, its fast calls, never its median. dualflow's own rows are never
excused.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from dualflow.bench import core_sharing
from dualflow.bench.core_sharing import shared
from dualflow.bench.cpu_share import machine_jiffies
from dualflow.bench.harness import Measurement

MAX_SPREAD = 0.5  # (p90 - p10) / median above this: the timings were disturbed
OTHERS_LIMIT = 0.15  # others' share of all cores' time below this: the machine is idle
ATTEMPTS = 3  # times a disturbed cell is measured before it stays busy (``until_quiet``)
T = TypeVar("T")


@dataclass
class IdleCheck:
    """What the gate saw before a cell: idle or not, others' CPU share, seconds waited."""

    idle: bool
    others: float
    waited_s: float


def others_cpu(window_s: float = 0.25) -> float:
    """Share (0..1) of all cores' time that was busy while this process slept ``window_s``
    (so: other processes' use). The 1-minute load average per core where /proc/stat is missing
    (it lags, and counts this process's last cell for a minute).

    Example:
        >>> 0.0 <= others_cpu(0.01) <= 1.0
        True
    """
    before = machine_jiffies()
    time.sleep(window_s)
    after = machine_jiffies()
    if before is None or after is None or after[1] == before[1]:
        return min(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
    return (after[0] - before[0]) / (after[1] - before[1])


def wait_until_idle(
    max_wait_s: float,
    limit: float = OTHERS_LIMIT,
    probe: Callable[[], float] = others_cpu,
    clock: Callable[[], float] = time.monotonic,
    sharing: Callable[[], float | None] | None = None,
) -> IdleCheck:
    """Probe until others use less than ``limit`` of the machine and the CPUs compute apart
    (``sharing``, else ``core_sharing.sharing_ratio``), or ``max_wait_s`` has passed.

    Example:
        >>> samples = iter([0.9, 0.5, 0.05])
        >>> check = wait_until_idle(60.0, probe=lambda: next(samples), sharing=lambda: 1.0)
        >>> check.idle, check.others
        (True, 0.05)
        >>> wait_until_idle(0.0, probe=lambda: 0.9).idle
        False
    """
    sharing = sharing or core_sharing.sharing_ratio
    start = clock()
    while True:
        others = probe()
        # a host's placement of both vCPUs on one core lasts seconds: worth waiting out
        ready = others < limit and not shared(sharing())
        waited = clock() - start
        if ready or waited >= max_wait_s:
            return IdleCheck(others < limit, others, waited)


def spread(row: Measurement) -> float | None:
    """``(p90 - p10) / median`` of a row's timings (``(max - min) / median`` for a row without
    percentiles); None for a note-only row.

    The slowest tenth of the calls is left out because on a machine with an OS it always holds
    the calls a timer tick, a page fault or a garbage collection interrupted, and the more calls
    a cell times the worse its single slowest one: ``max - min`` would call a cell of 200 quick
    calls disturbed on the quietest machine. Another process that takes a core for a tenth of the
    cell or more still moves the 90th percentile.

    Example:
        >>> spread(Measurement("w", "eager", 2.0, 1.5, 2.5, 5, 0))
        0.5
        >>> spread(Measurement.of_times("w", "eager", [2.0] * 28 + [9.0, 9.5], 0))
        0.0
    """
    if not row.repeats or row.ms_median <= 0:
        return None
    low, high = row.bounds()
    return (high - low) / row.ms_median


def until_quiet(
    measure_once: Callable[[], T],
    row_of: Callable[[T], Measurement],
    max_spread: float,
    attempts: int,
) -> T:
    """Measure a cell up to ``attempts`` times, until one attempt's spread is within
    ``max_spread``: a cell another process disturbed is measured again, as a person would rerun
    it, and the table and JSON say so (``attempts``, ``dropped_spreads``). The first quiet
    attempt is kept, else the one that spread least (it stays ``busy``). Which attempt is kept
    depends on the spread alone, never on the median, so re-measuring cannot pick a fast one.

    Example:
        >>> rows = iter([Measurement("w", "eager", 1.0, 0.5, 3.0, 5, 0),
        ...              Measurement("w", "eager", 1.2, 1.1, 1.3, 5, 0)])
        >>> row = until_quiet(lambda: next(rows), lambda r: r, 0.5, attempts=3)
        >>> row.ms_median, row.attempts, row.dropped_spreads
        (1.2, 2, [2.5])
    """
    tried: list[tuple[tuple, T]] = []
    for _ in range(max(1, attempts)):
        result = measure_once()
        how = _disturbance(row_of(result), max_spread)
        if how is None:  # quiet, or a note-only row: keep it
            tried.append(((-1.0,), result))
            break
        tried.append((how, result))
    keep = min(range(len(tried)), key=lambda k: tried[k][0])  # first quiet, else least disturbed
    row = row_of(tried[keep][1])
    row.attempts = len(tried)
    dropped = [spread(row_of(result)) for k, (_, result) in enumerate(tried) if k != keep]
    row.dropped_spreads = [round(w or 0.0, 3) for w in dropped] or None
    return tried[keep][1]


def shared_cores(row: Measurement) -> bool:
    """Whether two CPUs shared one core's arithmetic around the row's timed calls
    (``core_sharing``): its times are another machine's, however narrow and idle.

    Example:
        >>> shared_cores(Measurement("w", "eager", 1.0, 0.9, 1.1, 5, 0, cores_shared=1.98))
        True
    """
    return shared(row.cores_shared)


def crowded(row: Measurement) -> bool:
    """Whether other processes took ``OTHERS_LIMIT`` or more of the CPUs while the row's calls
    were timed (``cpu_share.others_during``): its times are not its own, however narrow.

    Example:
        >>> crowded(Measurement("w", "eager", 1.0, 0.9, 1.1, 5, 0, others_during=0.4))
        True
    """
    return row.others_during is not None and row.others_during >= OTHERS_LIMIT


def _disturbance(row: Measurement, max_spread: float) -> tuple | None:
    # None: quiet (or a note-only row); else a key ranking attempts, the least disturbed first
    width = spread(row)
    if width is None or (width <= max_spread and not crowded(row) and not shared_cores(row)):
        return None
    return shared_cores(row) or crowded(row), width


def varies_alone(row: Measurement, max_spread: float) -> bool:
    """Whether a row's wide spread is its framework's own, not a disturbance: a peer's cell,
    measured again and wide every time, the attempt kept run while other processes used less
    than ``OTHERS_LIMIT`` of the CPUs (``others_during``). dualflow's own rows never are.

    Example:
        >>> row = Measurement("w", "jax jit", 1.0, 0.2, 2.0, 9, 0, peer=True, spread=1.2,
        ...                   dropped_spreads=[1.1, 1.4], others_during=0.02)
        >>> varies_alone(row, 0.5), varies_alone(Measurement("w", "compiled", 1.0, 0.2, 2.0,
        ...     9, 0, spread=1.2, dropped_spreads=[1.1, 1.4], others_during=0.02), 0.5)
        (True, False)
    """
    wide = row.spread is not None and row.spread > max_spread
    again = bool(row.dropped_spreads) and all(s > max_spread for s in row.dropped_spreads or ())
    quiet = row.others_during is not None and row.others_during < OTHERS_LIMIT
    return row.peer and wide and again and quiet


def mark_busy(rows: Sequence[Measurement], max_spread: float = MAX_SPREAD) -> None:
    """Set each row's ``spread`` and flag ``busy`` when it exceeds ``max_spread``, unless the
    spread is a peer's own (``varies``: ``varies_alone``), or when others crowded its calls.

    Example:
        >>> rows = [Measurement("w", "eager", 1.0, 0.9, 1.1, 5, 0),
        ...         Measurement("w", "compiled", 1.0, 0.5, 2.0, 5, 0)]
        >>> mark_busy(rows); [r.busy for r in rows]
        [False, True]
    """
    for row in rows:
        row.spread = spread(row)
        row.varies = varies_alone(row, max_spread)
        wide = row.spread is not None and row.spread > max_spread and not row.varies
        row.busy = wide or (bool(row.repeats) and (crowded(row) or shared_cores(row)))


def verdict(rows: Sequence[Measurement], max_spread: float, gated: bool) -> tuple[bool, str]:
    """(counts, footer line): a run counts when no row's spread is too wide and, when gated,
    the machine was idle before every cell.

    Example:
        >>> row = Measurement("w", "eager", 1.0, 0.9, 1.1, 5, 0, idle=True)
        >>> mark_busy([row]); verdict([row], 0.5, gated=True)
        (True, 'run counts: every cell started on an idle machine, spreads within 0.50 x median')
    """
    measured = [r for r in rows if r.repeats]
    wide = [f"{r.workload} {r.mode}" for r in measured if r.busy]
    not_idle = [r for r in measured if r.idle is False]
    if wide:
        shown = ", ".join(wide[:6]) + (", ..." if len(wide) > 6 else "")
        reason = f"spread too wide ((p90-p10)/median > {max_spread:.2f}), others took "
        reason += f"{OTHERS_LIMIT:.0%} of the CPUs or two CPUs shared a core while timed in "
        reason += f"{len(wide)} of "
        return False, f"busy: {reason}{len(measured)} rows ({shown}); this run does not count"
    if gated and not_idle:
        worst = max(r.others_cpu or 0.0 for r in not_idle)
        reason = f"machine not idle before {len(not_idle)} cells (others used up to {worst:.0%})"
        return False, f"busy: {reason}; this run does not count"
    within = f"spreads within {max_spread:.2f} x median"
    alone = [f"{r.workload} {r.mode}" for r in measured if r.varies]
    if alone:
        within += f" but {', '.join(alone)} (varying on an idle machine: judged by its p10)"
    probed = [r.cores_shared for r in measured if r.cores_shared is not None]
    if probed:  # what the core-sharing probe saw, so a reader knows it looked
        within += f", CPUs computing apart around {len(probed)} cells (probe <= {max(probed):.2f})"
    if not gated:
        return False, f"{within}; no idle gate (--idle-wait): does not count"
    return True, f"run counts: every cell started on an idle machine, {within}"
