"""Other processes' share of the CPUs while a cell runs, from the kernel's counters.

``/proc/stat`` counts every CPU's busy time (a hypervisor's steal included); what the measured
code itself used is subtracted: a cell timed in this process owns this process's CPU time (all
its threads), a peer run in a child process owns that child's. What is left was taken by others:
another process, the compile worker, another guest of the host. The spread of a cell's timings
cannot tell such a disturbance from a framework's own variation; this share can.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

MIN_JIFFIES = 100  # kernel ticks over all CPUs below which ``others_during`` cannot say
T = TypeVar("T")


def machine_jiffies() -> tuple[int, int] | None:
    """(busy, total) jiffies over all CPUs since boot (steal is busy); None off Linux.

    Example:
        >>> counts = machine_jiffies()
        >>> counts is None or 0 <= counts[0] <= counts[1]
        True
    """
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def own_process() -> float:
    """CPU seconds this process has used, all its threads (a cell timed in it owns them).

    Example:
        >>> own_process() > 0
        True
    """
    times = os.times()
    return times.user + times.system


def own_children() -> float:
    """CPU seconds of this process's waited-for children (a peer's process owns them); this
    process's own threads then count as others, as they would disturb the child.

    Example:
        >>> own_children() >= 0
        True
    """
    times = os.times()
    return times.children_user + times.children_system


def others_during(
    run: Callable[[], T],
    own: Callable[[], float] = own_process,
    machine: Callable[[], tuple[int, int] | None] = machine_jiffies,
) -> tuple[T, float | None]:
    """``run()``'s result and the share (0..1) of all CPUs' time that others took meanwhile:
    busy time less ``own``'s CPU seconds. None off Linux, or over a window too short for the
    kernel's tick to measure (``MIN_JIFFIES``).

    Example:
        >>> result, share = others_during(lambda: sum(range(10)))
        >>> result, share is None or 0.0 <= share <= 1.0
        (45, True)
    """
    before, own_before = machine(), own()
    result = run()
    after, own_after = machine(), own()
    if before is None or after is None or after[1] - before[1] < MIN_JIFFIES:
        return result, None
    others = after[0] - before[0] - (own_after - own_before) * os.sysconf("SC_CLK_TCK")
    return result, min(1.0, max(0.0, others / (after[1] - before[1])))
