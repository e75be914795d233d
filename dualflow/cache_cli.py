"""``dualflow cache info|clear|warm``: what the disk caches hold, where, under which limit; empty
them; fill the kernels store with the fixed CPU kernels (``cache_warm.py``).

``clear`` removes only files the cache wrote (``disk_trim``: entries whose header carries the
key's owner tag, and its own temporary files); the key and anything else in a plans folder the
user chose are left alone, whatever their names.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from dualflow._config import cache_dir, cache_limit, user_path
from dualflow.disk_cache import KINDS, open_store
from dualflow.disk_trim import clear, usage
from dualflow.disk_trust import PROBLEMS, trusted_root

USAGE = "usage: dualflow cache info|clear|warm"


def _budgets(root: Path) -> list[tuple[str, tuple[tuple[Path, str], ...]]]:
    """(title, budget) of the root's folders and of a plans folder chosen elsewhere."""
    budgets = [("in the cache root", tuple((root / kind, kind) for kind in KINDS))]
    chosen = os.environ.get("DUALFLOW_PLAN_CACHE")
    if chosen and chosen not in ("0", "1"):
        plans = open_store("plans", user_path(chosen))
        if plans is not None and plans.budget != budgets[0][1]:
            budgets.append(("plans ($DUALFLOW_PLAN_CACHE)", plans.budget))
    return budgets


def _mb(size: int) -> str:
    return f"{size / 2**20:.1f} MB"


def info() -> str:
    """A description of every cache folder: entries and bytes per kind, the size limit.

    Example:
        >>> "limit" in info()
        True
    """
    root = trusted_root()
    if root is None:
        return f"cache root: {cache_dir()}: not used ({PROBLEMS.get(cache_dir())})"
    lines = [
        f"cache root: {root.path} (yours, writable only by you; entries signed with its key)",
        f"limit: {_mb(cache_limit())} per folder set (DUALFLOW_CACHE_MAX_MB); least recently "
        "used entries are removed beyond it",
    ]
    for title, budget in _budgets(root.path):
        rows = usage(root.key, budget)
        total = sum(size for _, _, size in rows)
        lines.append(f"{title}: {_mb(total)}")
        lines += [
            f"  {folder.name:9} {n:6} entries {_mb(size):>10}  {folder}" for folder, n, size in rows
        ]
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    """Run ``dualflow cache <info|clear|warm>``; 0 on success, 1 when the cache is not usable, 2
    for a bad argument.

    Example:
        >>> main(["nope"])
        usage: dualflow cache info|clear|warm
        2
    """
    if list(argv) not in (["info"], ["clear"], ["warm"]):
        print(USAGE)
        return 2
    root = trusted_root()
    if root is None:
        print(f"cache root: {cache_dir()}: not used ({PROBLEMS.get(cache_dir())})", file=sys.stderr)
        return 1
    if argv[0] == "info":
        print(info())
        return 0
    if argv[0] == "warm":
        return _warm()
    for title, budget in _budgets(root.path):
        print(f"{title}: removed {_mb(clear(root.key, budget))}")
    return 0


def _warm() -> int:
    """Compile the fixed CPU kernels into the kernels store, one line per route."""
    # imports numba; a cold store compiles for a minute or two
    from dualflow.cache_warm import warm  # noqa: PLC0415

    start = time.perf_counter()
    done = warm(lambda name: print(f"  {name}", flush=True))
    print(f"warmed {len(done)} kernel routes in {time.perf_counter() - start:.1f} s")
    return 0
