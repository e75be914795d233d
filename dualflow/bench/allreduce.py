"""``python -m dualflow.bench.allreduce``: all-reduce overhead and all-reduces per training step.

On 2 MPI ranks: ``comm.allreduce`` of 10M float32 against a raw mpi4py ``Allreduce`` of the same
buffer (target: at most 1.1x), and how many all-reduces one digits-CNN data-parallel step issues
with the default ``bucket_mb`` (target: one per bucket, not one per parameter).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dualflow.bench.distributed import RANKS, mpiexec_path, run_ranks


def _median_ms(fn: Callable[[], Any], comm: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        comm.barrier()  # start together, so one rank's lateness is not counted as transfer
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times) * 1e3)


def worker(out: str, elements: int, repeats: int) -> None:
    """One rank: time the three all-reduce variants and count the CNN step's all-reduces."""
    from dualflow.bench.distributed_worker import (  # noqa: PLC0415 - ranks only
        count_allreduces,
        data_parallel_step,
    )
    from dualflow.distributed import create_communicator  # noqa: PLC0415

    comm = create_communicator("mpi")
    x, out_array = np.ones(elements, np.float32), np.empty(elements, np.float32)
    variants = {
        "mpi4py Allreduce (raw)": lambda: comm.mpi_comm.Allreduce(x, out_array, op=comm.MPI.SUM),
        "comm.allreduce(x)": lambda: comm.allreduce(x),
        "comm.allreduce(x, out=y)": lambda: comm.allreduce(x, out=out_array),
    }
    for fn in variants.values():  # warm-up: first-touch pages, MPI connection set-up
        fn()
    # Interleaved rounds, so drifting machine load affects every variant alike.
    rounds = {name: [] for name in variants}
    for _ in range(5):
        for name, fn in variants.items():
            rounds[name].append(_median_ms(fn, comm, repeats))
    timings = {name: min(values) for name, values in rounds.items()}
    step, model = data_parallel_step(comm, seed=0)
    compiled, _ = data_parallel_step(comm, seed=0, compile=True)
    result = {
        "elements": elements,
        "ranks": comm.size,
        "ms": timings,
        "params": len(list(model.params())),
        "allreduces": {"eager": count_allreduces(comm, step)},
    }
    result["allreduces"]["compiled"] = count_allreduces(comm, compiled)
    if comm.rank == 0:
        with open(out, "w") as f:
            json.dump(result, f)


def report(result: dict[str, Any]) -> str:
    """The human-readable lines of one measurement.

    Example:
        >>> ms = {"mpi4py Allreduce (raw)": 10.0, "comm.allreduce(x)": 10.5}
        >>> r = {"elements": 10, "ranks": 2, "ms": ms, "params": 10,
        ...      "allreduces": {"eager": 1, "compiled": 1}}
        >>> print(report(r).splitlines()[2])
          comm.allreduce(x)          10.50 ms  (1.05x raw)
    """
    raw = result["ms"]["mpi4py Allreduce (raw)"]
    lines = [f"all-reduce of {result['elements']:,} float32 over {result['ranks']} ranks:"]
    for name, ms in result["ms"].items():
        ratio = "" if ms == raw else f"  ({ms / raw:.2f}x raw)"
        lines.append(f"  {name:<25}{ms:6.2f} ms{ratio}")
    counts = result["allreduces"]
    lines.append(
        f"digits CNN step, default bucket_mb: {result['params']} parameters -> "
        f"{counts['eager']} all-reduce call(s) eager, {counts['compiled']} in the compiled graph"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Launch the measurement on 2 ranks (or be one rank, with ``--worker OUT``)."""
    parser = argparse.ArgumentParser(prog="python -m dualflow.bench.allreduce", description=__doc__)
    parser.add_argument("--elements", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per round")
    parser.add_argument("--worker", metavar="OUT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.elements, args.repeats)
        return 0
    try:
        if not os.path.exists(mpiexec_path()):
            raise RuntimeError(f"no mpiexec next to {sys.executable}")
        # run_ranks puts its output path first; --worker takes it as its value.
        extra = ["--elements", str(args.elements), "--repeats", str(args.repeats)]
        result = run_ranks("dualflow.bench.allreduce", extra, RANKS, timeout=300, first="--worker")
    except RuntimeError as exc:
        print(f"allreduce bench: {exc}", file=sys.stderr)
        return 1
    print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
