"""The ``--peers`` part of ``dualflow bench``: its options, the peer runs and the report.

``add_arguments`` adds ``--peers``, ``--peers-python``, ``--idle-wait`` and ``--max-spread``;
``report`` runs the peers after dualflow's cells, flags busy rows and returns the side-by-side
table with its footer and what ``bench.json`` adds.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from dualflow.bench.harness import Measurement
from dualflow.bench.idle import MAX_SPREAD, mark_busy, verdict
from dualflow.bench.peers import goals
from dualflow.bench.peers.runner import run_peers

PEERS_IDLE_WAIT = 10.0  # --peers' default idle gate, seconds per cell


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the peer and busy-machine options to ``dualflow bench``'s parser.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_arguments(parser)
        >>> args = parser.parse_args(["--peers"])
        >>> args.peers, args.peers_python == sys.executable, idle_wait(args)
        (True, True, 10.0)
    """
    parser.add_argument(
        "--peers",
        action="store_true",
        help="also run the workloads in PyTorch (eager) and JAX (jit), each in a fresh process "
        f"with 2 threads, and print them side by side with the goals (default workloads: "
        f"{', '.join(goals.ISSUE_WORKLOADS)})",
    )
    parser.add_argument(
        "--peers-python",
        default=sys.executable,
        help="the interpreter that has torch and/or jax (default: this one); a framework it "
        "cannot import is skipped with a note",
    )
    parser.add_argument(
        "--idle-wait",
        type=float,
        default=None,
        help="before each cell wait up to this many seconds for other processes' CPU use to "
        f"settle (default: {PEERS_IDLE_WAIT:g} with --peers, else no gate)",
    )
    parser.add_argument(
        "--max-spread",
        type=float,
        default=MAX_SPREAD,
        help="flag a row busy when (max-min)/median of its timings exceeds this "
        f"(default {MAX_SPREAD}); a run with a busy row does not count",
    )


def idle_wait(args: argparse.Namespace) -> float | None:
    """The idle gate's wait per cell: ``--idle-wait``, else the ``--peers`` default, else None."""
    if args.idle_wait is not None:
        return max(0.0, args.idle_wait)
    return PEERS_IDLE_WAIT if args.peers else None


def report(
    args: argparse.Namespace,
    names: Sequence[str],
    rows: list[Measurement],
    repeats: Callable[[str], int],
    warmup: Callable[[str], int],
) -> tuple[list[Measurement], str, dict[str, Any]]:
    """Run the peers (with ``--peers``), flag busy rows among all; returns the peer rows, the
    text to print after dualflow's table (peer table and footer) and ``bench.json``'s extras.

    Example:
        >>> args = argparse.Namespace(peers=False, idle_wait=None, max_spread=0.5)
        >>> row = Measurement("w", "eager", 1.0, 0.9, 1.1, 3, 0)
        >>> report(args, ["w"], [row], lambda n: 3, lambda n: 1)[1]
        'spreads within 0.50 x median; no idle gate (--idle-wait): does not count'
    """
    wait = idle_wait(args)
    peer_rows: list[Measurement] = []
    notes: list[str] = []
    if args.peers:
        peer_rows, notes = run_peers(names, args.peers_python, repeats, warmup, wait)
    everything = [*rows, *peer_rows]
    mark_busy(everything, args.max_spread)
    counts, footer = verdict(everything, args.max_spread, gated=wait is not None)
    extra: dict[str, Any] = {"run": {"counts": counts, "verdict": footer}}
    if not args.peers:
        return peer_rows, footer, extra
    extra["peers"] = {
        "python": args.peers_python,
        "notes": notes,
        "goals": [asdict(g) for g in goals.evaluate(everything)],
    }
    line = f"peers run by {args.peers_python}: {'; '.join(notes) or 'none for these workloads'}"
    return peer_rows, goals.format_table(everything, [line], footer), extra
