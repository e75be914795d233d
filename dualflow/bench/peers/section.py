"""The ``--peers`` part of ``dualflow bench``: its options, the peer runs and the report.

``add_arguments`` adds ``--peers``, ``--peers-python``, ``--first-calls``, ``--idle-wait`` and
``--max-spread``; ``report`` runs the peers after dualflow's cells, flags busy rows, times first
calls (``first_calls``) and returns the side-by-side table with its footer and what
``bench.json`` adds.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from dualflow.bench import first_calls
from dualflow.bench.harness import Measurement
from dualflow.bench.idle import ATTEMPTS, MAX_SPREAD, mark_busy, verdict
from dualflow.bench.peers import goals
from dualflow.bench.peers.alternate import ROUNDS, SLOW_PEER, Alternated, alternate
from dualflow.bench.peers.runner import run_peers

PEERS_IDLE_WAIT = 10.0  # --peers' default idle gate, seconds per cell
FIRST_CALLS = "resnet18"  # --peers' default --first-calls: the issue's compile-time workload


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
        "--first-calls",
        default=None,
        help="comma-separated workloads whose compile and plan-cache load times to measure in "
        f"fresh processes (default with --peers: {FIRST_CALLS}; 'none' for none)",
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
        help="flag a row busy when (p90-p10)/median of its timings exceeds this "
        f"(default {MAX_SPREAD}); a run with a busy row does not count",
    )
    parser.add_argument(
        "--alternate-rounds",
        type=int,
        default=ROUNDS,
        help="with --peers, time each goal's two steps in this many alternated rounds (its "
        f"verdict is their median ratio; default {ROUNDS}; 0: judge the table's cells alone)",
    )
    parser.add_argument(
        "--attempts",
        type=int,
        default=ATTEMPTS,
        help="measure a cell whose spread exceeds --max-spread again, up to this many times in "
        f"all (default {ATTEMPTS}; 1: never again); its row says how many it took",
    )


def idle_wait(args: argparse.Namespace) -> float | None:
    """The idle gate's wait per cell: ``--idle-wait``, else the ``--peers`` default, else None."""
    if args.idle_wait is not None:
        return max(0.0, args.idle_wait)
    return PEERS_IDLE_WAIT if args.peers else None


def first_call_names(args: argparse.Namespace, names: Sequence[str]) -> list[str]:
    """Workloads whose first calls to measure: ``--first-calls``, else (with ``--peers``) the
    default among ``names``.

    Example:
        >>> first_call_names(argparse.Namespace(peers=True, first_calls=None), ["resnet18"])
        ['resnet18']
    """
    spec = args.first_calls
    if spec is None:
        return [FIRST_CALLS] if args.peers and FIRST_CALLS in names else []
    return [] if spec == "none" else [name for name in spec.split(",") if name]


def _first_calls(names: list[str], extra: dict[str, Any]) -> list[str]:
    lines = []
    for name in names:
        try:
            calls = first_calls.measure(name)
        except (subprocess.SubprocessError, ValueError, KeyError) as exc:  # a failed child
            said = (getattr(exc, "stderr", None) or str(exc)).strip().splitlines()
            lines.append(f"first calls of {name}: failed ({type(exc).__name__}: {said[-1:]})")
            continue
        lines += first_calls.format_lines(calls)
        extra.setdefault("first_calls", []).append({**asdict(calls), "compile_s": calls.compile_s})
    return lines


def _alternated(
    rows: list[Measurement],
    args: argparse.Namespace,
    warmup: Callable[[str], int],
    warm_step: Callable[[str, str], Any],
) -> tuple[dict[tuple[str, str, str], list[float]], list[str]]:
    # every goal with both rows measured, timed in alternated rounds; a failure is a note line
    rounds, notes = {}, []
    for workload in dict.fromkeys(r.workload for r in rows):
        for goal in goals.GOALS.get(workload, ()):
            ours, peer = (
                goals.find(rows, workload, goal.mode),
                goals.find(rows, workload, goal.peer),
            )
            if ours is None or peer is None:
                continue
            key = (workload, goal.mode, goal.peer)
            try:
                step = warm_step(workload, goal.mode)
                peer_side = (args.peers_python, warmup(workload))
                done = alternate(
                    key, step, ours.ms_median, peer.varies, peer_side, args.alternate_rounds,
                    peer_ms=goals.reference_ms(peer),
                )  # fmt: skip
            except Exception as exc:  # one goal's failed rounds must not hide the others'
                why = str(exc).splitlines()[0] if str(exc) else ""
                notes.append(
                    f"alternated rounds of {' '.join(key)} failed: {type(exc).__name__}: {why}"
                )
                continue
            rounds[key] = done.ratios
            if done.dropped or done.on_shared:
                notes.append(f"alternated rounds of {' '.join(key)}: {_left_out(done, args)}")
    return rounds, notes


def _left_out(done: Alternated, args: argparse.Namespace) -> str:
    """What a goal's alternated rounds left out, and why.

    Example:
        >>> done = Alternated("mlp", "compiled", "jax jit", 10, [1.0], dropped=1, on_shared=2)
        >>> _left_out(done, argparse.Namespace(alternate_rounds=4))
        '3 of 4 left out (2: two CPUs shared a core; 1: the peer alone ran over 2x its cell)'
    """
    why = [f"{done.on_shared}: two CPUs shared a core"] * bool(done.on_shared)
    why += [f"{done.dropped}: the peer alone ran over {SLOW_PEER:g}x its cell"] * bool(done.dropped)
    left = done.on_shared + done.dropped
    return f"{left} of {args.alternate_rounds} left out ({'; '.join(why)})"


def report(
    args: argparse.Namespace,
    names: Sequence[str],
    rows: list[Measurement],
    repeats: Callable[[str], int],
    warmup: Callable[[str], int],
    warm_step: Callable[[str, str], Any] | None = None,
) -> tuple[list[Measurement], str, dict[str, Any]]:
    """Run the peers (with ``--peers``), flag busy rows among all; returns the peer rows, the
    text to print after dualflow's table (peer table and footer) and ``bench.json``'s extras.

    Example:
        >>> args = argparse.Namespace(peers=False, idle_wait=None, max_spread=0.5,
        ...                           attempts=1, first_calls=None)
        >>> row = Measurement("w", "eager", 1.0, 0.9, 1.1, 3, 0)
        >>> report(args, ["w"], [row], lambda n: 3, lambda n: 1)[1]
        'spreads within 0.50 x median; no idle gate (--idle-wait): does not count'
    """
    wait = idle_wait(args)
    peer_rows: list[Measurement] = []
    notes: list[str] = []
    if args.peers:
        retry = (args.max_spread, args.attempts)
        peer_rows, notes = run_peers(names, args.peers_python, repeats, warmup, wait, retry)
    everything = [*rows, *peer_rows]
    mark_busy(everything, args.max_spread)
    counts, footer = verdict(everything, args.max_spread, gated=wait is not None)
    extra: dict[str, Any] = {"run": {"counts": counts, "verdict": footer}}
    timed = _first_calls(first_call_names(args, names), extra)
    if not args.peers:
        return peer_rows, "\n".join([footer, *timed]), extra
    rounds: dict[tuple[str, str, str], list[float]] = {}
    failed: list[str] = []
    if warm_step is not None and getattr(args, "alternate_rounds", 0) > 0:
        rounds, failed = _alternated(everything, args, warmup, warm_step)
    extra["peers"] = {
        "python": args.peers_python,
        "notes": notes + failed,
        "goals": [asdict(g) for g in goals.evaluate(everything, rounds)],
    }
    line = f"peers run by {args.peers_python}: {'; '.join(notes) or 'none for these workloads'}"
    table = goals.format_table(everything, [line, *failed], footer, rounds)
    return peer_rows, "\n".join([table, *timed]), extra
