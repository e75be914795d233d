"""Runs the peers: one fresh process per (framework, workload) under ``--peers-python``, with 2
threads, reading back only its one marked JSON line (``child.py``'s ``MARKER``) as a table row.

Nothing the child prints is executed: the marked line is parsed with ``json.loads`` and its
numbers are checked; a framework the interpreter cannot import is skipped with a one-line note.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dualflow.bench import core_sharing
from dualflow.bench.cpu_share import others_during, own_children
from dualflow.bench.harness import Measurement
from dualflow.bench.idle import MAX_SPREAD, until_quiet, wait_until_idle
from dualflow.bench.peers.child import MARKER, PROBE

CHILD = Path(__file__).with_name("child.py")
THREADS = 2
FRAMEWORKS = ("torch", "jax", "numpy")  # numpy: the python floor (floor_workloads)
_BOTH = ("torch", "jax")
# The workloads with peer versions (torch_workloads / jax_workloads / floor_workloads).
PEERS: dict[str, tuple[str, ...]] = {
    "tiny-ops": FRAMEWORKS,
    "tiny-ops-fwd": _BOTH,
    "mlp": _BOTH,
    "elementwise": _BOTH,
    "poly-chain": _BOTH,
    "small-cnn": _BOTH,
    "resnet18": ("torch",),
    "gradient-penalty-mlp": _BOTH,
    "per-example-grads": ("torch",),  # torch.func's vmap(grad)
    "transformer-lm": ("torch",),
    "lstm-lm": ("torch",),
    "variable-batch": ("torch",),  # issue 39: a step is one pass over 40 sizes
    "variable-seq": ("torch",),
    "variable-batch-infer": ("torch",),
}
_TIMINGS = ("median_ms", "min_ms", "max_ms")


def peer_env(threads: int = THREADS, base: dict[str, str] | None = None) -> dict[str, str]:
    """The child's environment: ``threads`` for OpenMP, OpenBLAS, MKL and XLA; no PYTHONPATH
    (the child imports only its own folder and the peers' interpreter's packages).

    Example:
        >>> env = peer_env(2, {"PYTHONPATH": "/repo", "HOME": "/root"})
        >>> sorted(env), env["OMP_NUM_THREADS"]
        (['HOME', 'MKL_NUM_THREADS', 'OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'XLA_FLAGS'], '2')
    """
    env = dict(os.environ if base is None else base)
    env.pop("PYTHONPATH", None)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    env["XLA_FLAGS"] = f"--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads={threads}"
    return env


def parse_result(stdout: str) -> dict[str, Any]:
    """The JSON object on the last line that starts with ``MARKER``; ValueError when there is
    none, it is not an object, or its timings are not finite non-negative numbers.

    Example:
        >>> parse_result('noise\\nDUALFLOW_PEER_RESULT {"skip": "no torch"}\\n')
        {'skip': 'no torch'}
        >>> parse_result("print('hi')")
        Traceback (most recent call last):
        ...
        ValueError: no DUALFLOW_PEER_RESULT line in the peer's output
    """
    lines = [line for line in stdout.splitlines() if line.startswith(MARKER)]
    if not lines:
        raise ValueError(f"no {MARKER.strip()} line in the peer's output")
    record = json.loads(lines[-1][len(MARKER) :])
    if not isinstance(record, dict):
        raise ValueError("the peer's result is not a JSON object")
    if {"skip", "error", "probe"} & set(record):
        return record
    for key in _TIMINGS:
        value = record.get(key)
        if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise ValueError(f"the peer's result has no valid {key}: {value!r}")
    return record


def _spawn(argv: list[str], timeout: float) -> tuple[dict[str, Any] | None, str]:
    # (record, why not): the child's parsed result, or None and a one-line reason.
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, env=peer_env(), check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    try:
        return parse_result(done.stdout), ""
    except ValueError as exc:
        last = (done.stderr.strip().splitlines() or [""])[-1][:200]
        return None, f"exit {done.returncode}: {exc}; {last}".rstrip("; ")


def probe(python: str, framework: str, child: Path = CHILD, timeout: float = 120.0) -> str:
    """``"torch 2.13.0"`` when ``python`` can run ``framework``'s peers, else the one-line note
    saying why not (``"torch peers skipped: ..."``).

    Example:
        >>> probe("/nonexistent/python", "torch").startswith("torch peers skipped: ")
        True
    """
    record, why = _spawn([python, str(child), framework, PROBE, "0", "0"], timeout)
    if record is None or "probe" not in record:
        reason = why if record is None else record.get("skip") or record.get("error")
        return f"{framework} peers skipped: {reason}"
    return f"{framework} {record.get('version')}"


def run_peer(
    python: str,
    framework: str,
    workload: str,
    repeats: int,
    warmup: int,
    child: Path = CHILD,
    timeout: float = 900.0,
) -> Measurement:
    """One peer row, measured in a fresh ``python`` process (a note-only row when it failed).

    Example:
        >>> run_peer("/nonexistent/python", "torch", "mlp", 3, 1).note.startswith("failed: ")
        True
    """
    argv = [python, str(child), framework, workload, str(repeats), str(warmup)]
    record, why = _spawn(argv, timeout)
    mode = str((record or {}).get("mode", f"{framework} peer"))
    if record is None or "error" in record or "skip" in record:
        note = f"skipped: {record['skip']}" if record and "skip" in record else None
        note = note or f"failed: {why or (record or {}).get('error')}"
        return Measurement(workload, mode, 0.0, 0.0, 0.0, 0, 0, note=note)
    median, low, high = (float(record[key]) for key in _TIMINGS)
    row = Measurement(workload, mode, median, low, high, repeats, 0, peer=True)
    deciles = [record.get(key) for key in ("p10_ms", "p90_ms")]
    if all(isinstance(v, int | float) and math.isfinite(v) and low <= v <= high for v in deciles):
        row.ms_p10, row.ms_p90 = (float(v) for v in deciles)  # else min and max stand for them
    return row


def run_peers(
    names: Sequence[str],
    python: str,
    repeats: Callable[[str], int],
    warmup: Callable[[str], int],
    idle_wait: float | None = None,
    retry: tuple[float, int] = (MAX_SPREAD, 1),
    child: Path = CHILD,
) -> tuple[list[Measurement], list[str]]:
    """Peer rows for ``names`` (those with peers) and one line per framework: its version, or
    the note saying why it was skipped. ``retry`` (max spread, attempts) measures a disturbed
    peer again, as ``idle.until_quiet`` does dualflow's cells.

    Example:
        >>> rows, notes = run_peers(["mlp"], "/nonexistent/python", lambda n: 3, lambda n: 1)
        >>> rows, [note.split(":")[0] for note in notes]
        ([], ['torch peers skipped', 'jax peers skipped'])
    """
    wanted = [f for f in FRAMEWORKS if any(f in PEERS.get(n, ()) for n in names)]
    notes = {f: probe(python, f, child) for f in wanted}
    rows = []
    for name in names:
        for framework in PEERS.get(name, ()):
            if notes[framework].startswith(f"{framework} peers skipped"):
                continue

            def attempt(framework: str = framework, name: str = name) -> Measurement:
                check = None if idle_wait is None else wait_until_idle(idle_wait)
                args = (python, framework, name, repeats(name), warmup(name), child)
                # the CPUs computing apart around the child's run (the probe's default settle
                # outlasts the spinning of a finished peer's threads)
                before = core_sharing.sharing_ratio()
                row, others = others_during(lambda: run_peer(*args), own_children)
                row.others_during = others
                after = core_sharing.sharing_ratio()
                row.cores_shared = core_sharing.worst_sharing(before, after)
                if check is not None:
                    row.idle, row.others_cpu = check.idle, check.others
                return row

            rows.append(until_quiet(attempt, lambda row: row, *retry))
    return rows, list(notes.values())
