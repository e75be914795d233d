"""One rank of the bench's ``distributed`` workload: data-parallel training steps, overlap on/off.

Run under ``mpiexec -n 2 python -m dualflow.bench.distributed_worker OUT REPEATS SEED``: every rank
times the digits-CNN step and a step of an MLP with 11.6 MB of gradients, eager and compiled, each
with the bucket all-reduces overlapping backward (the default) and without; rank 0 writes the
bench rows (whether the ranks ended with identical parameters, the all-reduces per step, and the
overlap on/off times) as JSON to ``OUT``. Modes run in interleaved rounds, so drifting machine load
affects each alike.
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import dualflow
from dualflow import nn, ops, optim
from dualflow.bench.harness import Measurement, peak_memory
from dualflow.bench.modes import compare, compile_report, held_bytes, max_difference
from dualflow.data import load_digits
from dualflow.distributed import Communicator, create_communicator, create_multi_node_optimizer
from dualflow.passes import O2
from dualflow.vision.models.digits_cnn import digits_cnn

BATCH = 64  # per rank: each rank does the single-process ``cnn`` workload's work
ALLREDUCE_OPS = ("allreduce", "allreduce_start")  # a bucketing pass may split the op in two
NO_OVERLAP_PASSES = tuple(p for p in O2 if p != "bucket_allreduce")
MLP_WIDTHS = (784, 1024, 1024, 1024, 10)  # 2.9M parameters: 11.6 MB of float32 gradients
# (mode prefix, model, bucket_mb): the MLP's small buckets let the first ones start early
MODELS = (("", "cnn", 25.0), ("mlp ", "mlp", 2.0))
# (mode, compiled, overlap)
MODES = (
    ("eager", False, True),
    ("eager no-overlap", False, False),
    ("compiled", True, True),
    ("compiled no-overlap", True, False),
)


def build_model(kind: str = "cnn") -> nn.Module:
    """The digits CNN of ``examples/train_digits_cnn.py`` (no dropout), or the 11.6 MB MLP.

    Example:
        >>> len(list(build_model().params())), len(list(build_model("mlp").params()))
        (10, 8)
    """
    if kind == "cnn":
        return digits_cnn()
    layers: list[nn.Module] = []
    for fan_in, fan_out in itertools.pairwise(MLP_WIDTHS):
        layers += [nn.Linear(fan_in, fan_out), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def _batch(comm: Communicator, seed: int, kind: str) -> tuple[Any, Any]:
    rng = np.random.default_rng(seed)
    if kind == "mlp":
        rng = np.random.default_rng(seed + 1 + comm.rank)
        x = rng.normal(size=(BATCH, MLP_WIDTHS[0])).astype(np.float32)
        return dualflow.tensor(x), dualflow.tensor(rng.integers(0, MLP_WIDTHS[-1], BATCH))
    images, labels = load_digits("train")
    pick = rng.choice(len(labels), BATCH * comm.size, replace=False)
    mine = pick[comm.rank * BATCH : (comm.rank + 1) * BATCH]
    return dualflow.tensor(images[mine]), dualflow.tensor(labels[mine])


def data_parallel_step(
    comm: Communicator,
    seed: int,
    compile: bool = False,
    bucket_mb: float = 25,
    kind: str = "cnn",
    overlap: bool = True,
) -> tuple[Callable[[], Any], nn.Module]:
    """A no-argument training step on this rank's ``BATCH`` examples, and its model.

    Every call with the same ``seed`` starts from the same parameters and data, on any rank
    count; gradients are averaged over ``comm`` by a multi-node optimizer. ``overlap=False``
    averages in ``step()`` (and compiles without the ``bucket_allreduce`` pass).

    Example:
        >>> step, model = data_parallel_step(create_communicator("loopback"), seed=0)
        >>> float(step().numpy()) > 0
        True
    """
    dualflow.random.seed(seed)
    model = build_model(kind)
    comm.bcast_params(model)
    x, t = _batch(comm, seed, kind)
    sgd = optim.SGD(list(model.params()), lr=0.05)
    opt = create_multi_node_optimizer(sgd, comm, bucket_mb, model=model, overlap=overlap)

    def step() -> Any:
        opt.zero_grad()
        loss = ops.softmax_cross_entropy(model(x), t)
        loss.backward()
        opt.step()
        return loss.detach()

    if not compile:
        return step, model
    return dualflow.compile(step, passes=None if overlap else NO_OVERLAP_PASSES), model


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
    raw = comm.start_allreduce

    def counting(*args: Any, **options: Any) -> Any:
        calls[0] += 1
        return raw(*args, **options)

    comm.start_allreduce = counting  # an instance attribute shadows the method for one step
    try:
        step()
    finally:
        del comm.start_allreduce
    return calls[0]


def _time_rounds(comm: Communicator, steps: dict[str, Callable], repeats: int) -> dict:
    """Per mode, ``repeats`` step times (ms) measured in 5 interleaved rounds after warm-up."""
    for step in steps.values():
        for _ in range(3):  # compiled: trace, retrace (optimizer state appears), plan
            step()
    times: dict[str, list[float]] = {mode: [] for mode in steps}
    per_round = max(1, repeats // 5)
    for _ in range(5):
        for mode, step in steps.items():
            comm.barrier()  # start together: one rank's lateness is not the step's time
            for _ in range(per_round):
                start = time.perf_counter()
                step()
                times[mode].append((time.perf_counter() - start) * 1e3)
    return {mode: np.array(values) for mode, values in times.items()}


def measure_model(
    comm: Communicator, prefix: str, kind: str, bucket_mb: float, repeats: int, seed: int
) -> list[Measurement]:
    """The four (mode) rows of one model on this rank, compared with its eager row."""
    built = {
        mode: data_parallel_step(comm, seed, compiled, bucket_mb, kind, overlap)
        for mode, compiled, overlap in MODES
    }
    steps = {mode: step for mode, (step, _) in built.items()}
    counts = {mode: count_allreduces(comm, step) for mode, step in steps.items()}
    times = _time_rounds(comm, steps, repeats)
    rows, states = [], {}
    for mode, (step, model) in built.items():
        ms = times[mode]
        peak = peak_memory(step) + held_bytes(step)
        compile_ms, plan_steps = compile_report(step)
        row = Measurement.of_times("distributed", prefix + mode, ms, peak)
        row.compile_ms = compile_ms
        row.steps = plan_steps
        rows.append(row)
        states[mode] = [p.numpy().astype(np.float64) for p in model.params()]
    for row in rows:
        compare(row, rows[0], states["eager"], states[row.mode[len(prefix) :]])
    everyone = comm.allgather([states[m] for m, _, _ in MODES])
    rank_diff = max(max_difference(a, b) for other in everyone for a, b in zip(everyone[0], other))
    agree = "ranks agree" if rank_diff == 0 else f"RANKS DIFFER ({rank_diff:.1e})"
    on_off = {
        label: (rows[i].ms_median, rows[i + 1].ms_median)
        for i, label in ((0, "eager"), (2, "compiled"))
    }
    overlap = "; ".join(
        f"{label} overlap on/off {on:.2f}/{off:.2f} ms ({off / on:.2f}x)"
        for label, (on, off) in on_off.items()
    )
    model_text = "digits CNN" if kind == "cnn" else "MLP 11.6 MB grads"
    for row in rows:
        row.note = (
            f"{model_text}, {comm.size} ranks x batch {BATCH}, bucket_mb {bucket_mb:g}; {agree}; "
            f"allreduces/step {counts['eager']} eager / {counts['compiled']} compiled; {overlap}"
        )
    return rows


def run(comm: Communicator, repeats: int, seed: int) -> dict[str, Any]:
    """Every model and mode on this rank; the rows as plain dicts."""
    rows = []
    for prefix, kind, bucket_mb in MODELS:
        rows += measure_model(comm, prefix, kind, bucket_mb, repeats, seed)
    return {"rows": [row.as_dict() for row in rows]}


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
