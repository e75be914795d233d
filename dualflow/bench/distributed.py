"""The bench's ``distributed`` workload, parent side: launch ranks with ``mpiexec``, read rows.

The ranks run ``dualflow.bench.distributed_worker`` (or another module) in fresh interpreters;
rank 0 writes JSON to a temporary file this process reads. Without ``mpiexec`` next to
``sys.executable`` the workload reports one row saying it was skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

from dualflow.bench.harness import Measurement

RANKS = 2


def mpiexec_path() -> str:
    """The ``mpiexec`` of this interpreter's environment (the one mpi4py was built against).

    Example:
        >>> os.path.dirname(mpiexec_path()) == os.path.dirname(sys.executable)
        True
    """
    return os.path.join(os.path.dirname(sys.executable), "mpiexec")


def _rank_env() -> dict[str, str]:
    env = dict(os.environ)
    # Split the cores between the ranks: two ranks each using every core for BLAS would
    # oversubscribe the machine and time the contention instead of the step.
    threads = str(max(1, (os.cpu_count() or RANKS) // RANKS))
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(name, threads)
    return env


def run_ranks(
    module: str, args: list[str], ranks: int = RANKS, timeout: float = 120, first: str = ""
) -> Any:
    """Run ``python -m module [first] OUT *args`` on ``ranks`` MPI ranks; returns OUT's JSON.

    Rank 0 is expected to write JSON to the temporary path OUT.

    Raises:
        RuntimeError: the job failed or timed out (with the end of its stderr).

    Example:
        >>> run_ranks("json.tool", ["--help"])  # doctest: +SKIP
    """
    with tempfile.TemporaryDirectory(prefix="dualflow-bench-") as tmp:
        out = os.path.join(tmp, "rank0.json")
        command = [mpiexec_path(), "-n", str(ranks), sys.executable, "-m", module]
        command += [first, out, *args] if first else [out, *args]
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=timeout, env=_rank_env()
            )
        except subprocess.TimeoutExpired:
            raise RuntimeError(
                f"{module} on {ranks} ranks timed out after {timeout:.0f}s"
            ) from None
        if done.returncode != 0 or not os.path.exists(out):
            tail = " | ".join(done.stderr.strip().splitlines()[-3:])
            raise RuntimeError(f"{module} on {ranks} ranks failed ({done.returncode}): {tail}")
        with open(out) as f:
            return json.load(f)


def note_row(note: str) -> Measurement:
    """A row that carries only a note (a skipped or failed workload): no numbers.

    Example:
        >>> note_row("skipped").repeats
        0
    """
    return Measurement("distributed", "-", 0.0, 0.0, 0.0, 0, 0, note=note)


def distributed_rows(repeats: int, seed: int) -> list[Measurement]:
    """The eager and compiled rows of a 2-rank data-parallel CNN step (or one note row).

    Example:
        >>> rows = distributed_rows(3, 0)  # doctest: +SKIP
        >>> [r.mode for r in rows]  # doctest: +SKIP
        ['eager', 'compiled']
    """
    if not os.path.exists(mpiexec_path()):
        return [
            note_row(f"skipped: no mpiexec next to {sys.executable} (pip install mpi4py mpich)")
        ]
    try:
        result = run_ranks("dualflow.bench.distributed_worker", [str(repeats), str(seed)])
    except RuntimeError as exc:
        return [note_row(f"failed: {exc}")]
    return [Measurement(**row) for row in result["rows"]]
