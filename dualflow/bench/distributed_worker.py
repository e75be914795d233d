"""One rank of the bench's ``distributed`` workload: a data-parallel digits-CNN training step.

Run under ``mpiexec -n 2 python -m dualflow.bench.distributed_worker OUT REPEATS SEED``: every
rank times the step eager and compiled; rank 0 writes the bench rows (and whether the ranks
ended with identical parameters, and the all-reduces per step) as JSON to ``OUT``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

import dualflow
from dualflow import nn, ops, optim
from dualflow.bench.harness import Measurement, peak_memory, time_calls
from dualflow.bench.modes import compare, compile_report, held_bytes, max_difference
from dualflow.data import load_digits
from dualflow.distributed import Communicator, create_communicator, create_multi_node_optimizer
from dualflow.vision.models.digits_cnn import digits_cnn

BATCH = 64  # per rank: each rank does the single-process ``cnn`` workload's work
ALLREDUCE_OPS = ("allreduce", "allreduce_start")  # a bucketing pass may split the op in two


def build_model() -> nn.Module:
    """The digits CNN of ``examples/train_digits_cnn.py`` (without dropout, so runs compare).

    Example:
        >>> len(list(build_model().params()))
        10
    """
    return digits_cnn()


def data_parallel_step(
    comm: Communicator, seed: int, compile: bool = False, bucket_mb: float = 25
) -> tuple[Callable[[], Any], nn.Module]:
    """A no-argument training step on this rank's ``BATCH`` digits, and its model.

    Every call with the same ``seed`` starts from the same parameters and data, on any rank
    count; gradients are averaged over ``comm`` by a multi-node optimizer packing by name.

    Example:
        >>> step, model = data_parallel_step(create_communicator("loopback"), seed=0)
        >>> float(step().numpy()) > 0
        True
    """
    dualflow.random.seed(seed)
    model = build_model()
    comm.bcast_params(model)
    images, labels = load_digits("train")
    pick = np.random.default_rng(seed).choice(len(labels), BATCH * comm.size, replace=False)
    mine = pick[comm.rank * BATCH : (comm.rank + 1) * BATCH]
    x, t = dualflow.tensor(images[mine]), dualflow.tensor(labels[mine])
    sgd = optim.SGD(list(model.params()), lr=0.05)
    opt = create_multi_node_optimizer(sgd, comm, bucket_mb, model=model)

    def step() -> Any:
        opt.zero_grad()
        loss = ops.softmax_cross_entropy(model(x), t)
        loss.backward()
        opt.step()
        return loss.detach()

    return (dualflow.compile(step) if compile else step), model


def count_allreduces(comm: Communicator, step: Callable[[], Any]) -> int:
    """All-reduces one call of ``step`` issues: graph nodes when compiled, else eager calls.

    Example:
        >>> comm = create_communicator("loopback")
        >>> count_allreduces(comm, data_parallel_step(comm, seed=0)[0])
        1
    """
    if isinstance(step, dualflow.tracer.CompiledFunction):
        if not step.history:
            step()
        return sum(n.op in ALLREDUCE_OPS for n in step.history[-1].graph.nodes)
    calls = [0]
    raw = comm.allreduce_array

    def counting(array: Any, reduction: str = "sum", **options: Any) -> Any:
        calls[0] += 1
        return raw(array, reduction, **options)

    comm.allreduce_array = counting  # an instance attribute shadows the method for one step
    try:
        step()
    finally:
        del comm.allreduce_array
    return calls[0]


def measure_mode(comm: Communicator, mode: str, repeats: int, seed: int) -> dict[str, Any]:
    """Time ``repeats`` steps in ``mode`` (``eager``/``compiled``) on this rank."""
    step, model = data_parallel_step(comm, seed, compile=mode == "compiled")
    last: list[Any] = [None]

    def call() -> None:
        last[0] = step()

    times = time_calls(call, repeats) * 1e3
    peak = peak_memory(call) + held_bytes(step)  # as for the single-process rows
    compile_ms, steps = compile_report(step)
    row = Measurement(
        "distributed", mode, *_stats(times), repeats, peak, compile_ms=compile_ms, steps=steps
    )
    state = [p.numpy().astype(np.float64) for p in model.params()]
    state.append(last[0].numpy().astype(np.float64))
    return {"row": row, "state": state, "allreduces": count_allreduces(comm, step)}


def _stats(times: np.ndarray) -> tuple[float, float, float]:
    return float(np.median(times)), float(times.min()), float(times.max())


def run(comm: Communicator, repeats: int, seed: int) -> dict[str, Any]:
    """Both modes on this rank; the rows (with the cross-rank check) as plain dicts."""
    eager = measure_mode(comm, "eager", repeats, seed)
    compiled = measure_mode(comm, "compiled", repeats, seed)
    row, ref = compiled["row"], eager["row"]
    compare(row, ref, eager["state"], compiled["state"])
    # The parameters every rank ended with must be identical (data parallelism's invariant).
    states = comm.allgather([s for s in compiled["state"][:-1]])
    rank_diff = max(max_difference(states[0], other) for other in states)
    counts = f"{eager['allreduces']} eager / {compiled['allreduces']} compiled"
    agree = "ranks agree" if rank_diff == 0 else f"RANKS DIFFER ({rank_diff:.1e})"
    for r in (ref, row):
        r.note = f"{comm.size} ranks x batch {BATCH}; {agree}; allreduces/step {counts}"
    return {
        "rows": [ref.as_dict(), row.as_dict()],
        "rank_diff": rank_diff,
        "allreduces": {"eager": eager["allreduces"], "compiled": compiled["allreduces"]},
    }


def main(argv: list[str] | None = None) -> int:
    """Entry point on every rank: ``OUT REPEATS SEED``; rank 0 writes the JSON to ``OUT``."""
    out, repeats, seed = (argv if argv is not None else sys.argv[1:])[:3]
    comm = create_communicator("mpi")
    result = run(comm, int(repeats), int(seed))
    if comm.rank == 0:
        with open(out, "w") as f:
            json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
