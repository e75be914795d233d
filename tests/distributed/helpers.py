"""Shared pieces of the distributed tests: a tiny MLP, its data, a data-parallel run, and the
launcher of the MPI scenarios (``mpi_scenarios.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import dualflow
from dualflow import ops, optim
from dualflow.distributed import create_multi_node_optimizer
from dualflow.nn import Parameter

SHAPES = [(8, 4), (8,), (3, 8), (3,)]
NAMES = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]


def make_params(dtype: Any = np.float32) -> list[Parameter]:
    """The same initial parameters on every call (so ranks start equal without a bcast)."""
    rng = np.random.default_rng(0)
    return [Parameter((rng.normal(size=s) * 0.5).astype(dtype)) for s in SHAPES]


def batches(steps: int, per_rank: int, size: int, dtype: Any = np.float32) -> list[tuple]:
    """``steps`` global batches of ``per_rank * size`` rows (rank r takes rows r*per_rank...)."""
    rng = np.random.default_rng(42)
    n = per_rank * size
    return [
        (rng.normal(size=(n, 4)).astype(dtype), rng.integers(0, 3, size=n)) for _ in range(steps)
    ]


def loss_of(params: list[Parameter], x: Any, t: Any) -> Any:
    w1, b1, w2, b2 = params
    return ops.softmax_cross_entropy(ops.linear(ops.relu(ops.linear(x, w1, b1)), w2, b2), t)


def make_step(params: list[Parameter], opt: Any) -> Callable[[Any, Any], Any]:
    """A whole training step: zero_grad, forward, backward, (averaged) update."""

    def step(x: Any, t: Any) -> Any:
        opt.zero_grad()
        loss = loss_of(params, x, t)
        loss.backward()
        opt.step()
        return loss.detach()

    return step


def data_parallel(
    comm: Any,
    data: list,
    per_rank: int,
    compile: bool = False,
    order: list[int] | None = None,
    **kwargs: Any,
) -> tuple[list[np.ndarray], Any]:
    """Train on this rank's rows of each batch; returns the final parameters and the step.

    ``order`` lists the parameters to the optimizer in that order (default: as created).
    """
    params = make_params(data[0][0].dtype)
    listed = [params[i] for i in (order or range(len(params)))]
    opt = create_multi_node_optimizer(optim.SGD(listed, lr=0.5), comm, **kwargs)
    step = make_step(params, opt)
    fn = dualflow.compile(step, fallback="error") if compile else step
    lo, hi = comm.rank * per_rank, (comm.rank + 1) * per_rank
    for x, t in data:
        fn(dualflow.tensor(x[lo:hi]), dualflow.tensor(t[lo:hi]))
    return [p.numpy() for p in params], fn


def single_process(data: list) -> list[np.ndarray]:
    """The reference: one process, SGD on the whole batch (the mean loss over every row)."""
    params = make_params(data[0][0].dtype)
    step = make_step(params, optim.SGD(params, lr=0.5))
    for x, t in data:
        step(dualflow.tensor(x), dualflow.tensor(t))
    return [p.numpy() for p in params]


MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")
ROOT = Path(__file__).resolve().parents[2]


def run_scenario(
    name: str, out: Path, *args: str, ranks: int = 2, timeout: float = 30.0
) -> subprocess.CompletedProcess:
    """``mpiexec -n ranks python -m tests.distributed.mpi_scenarios name out *args``.

    ``timeout`` is each communicator's collective timeout (the watchdog's); the job itself is
    given three times that (plus start-up) before the test gives up on it.
    """
    keep = ("DUALFLOW_CACHE_DIR",)  # the ranks may share the kernel cache, nothing else
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUALFLOW_") or k in keep}
    env.update(PYTHONPATH=str(ROOT), SCENARIO_TIMEOUT=str(timeout), OMP_NUM_THREADS="1")
    command = [MPIEXEC, "-n", str(ranks), sys.executable, "-m", "tests.distributed.mpi_scenarios"]
    return subprocess.run(
        [*command, name, str(out), *args],
        capture_output=True,
        text=True,
        timeout=3 * timeout + 60,
        env=env,
        cwd=ROOT,
    )
