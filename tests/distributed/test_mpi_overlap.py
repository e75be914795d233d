"""Overlapped all-reduces under real MPI (``mpiexec -n 2``): a compiled step with the
``bucket_allreduce`` pass gives the same parameters on both ranks as the blocking pipeline,
and the step times of both are printed (a benchmark number, not an assertion)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")
ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(not os.path.exists(MPIEXEC), reason="no mpiexec next to sys.executable"),
]

SCRIPT = """
import json, sys, time
import numpy as np
import dualflow
from dualflow import ops, optim
from dualflow.distributed import create_communicator, create_multi_node_optimizer
from dualflow.nn import Parameter
from dualflow.passes import O2

WIDTHS, BATCH, STEPS = [256, 1024, 1024, 1024, 10], 64, 8
comm = create_communicator("mpi")
rng = np.random.default_rng(comm.rank)
data = [(rng.normal(size=(BATCH, WIDTHS[0])).astype(np.float32), rng.integers(0, 10, BATCH))
        for _ in range(STEPS)]


def run(passes):
    init = np.random.default_rng(0)
    params = []
    for fan_in, fan_out in zip(WIDTHS, WIDTHS[1:]):
        params.append(Parameter((init.normal(size=(fan_out, fan_in)) / fan_in**0.5)
                                .astype(np.float32)))
        params.append(Parameter(np.zeros(fan_out, np.float32)))
    opt = create_multi_node_optimizer(optim.SGD(params, lr=0.1), comm, bucket_mb=2)

    def step(x, t):
        opt.zero_grad()
        h = x
        for i in range(0, len(params) - 2, 2):
            h = ops.relu(ops.linear(h, params[i], params[i + 1]))
        loss = ops.softmax_cross_entropy(ops.linear(h, params[-2], params[-1]), t)
        loss.backward()
        opt.step()
        return loss.detach()

    fn = dualflow.compile(step, fallback="error", passes=passes)
    times = []
    for x, t in data:
        comm.barrier()
        start = time.perf_counter()
        fn(dualflow.tensor(x), dualflow.tensor(t))
        times.append(time.perf_counter() - start)
    ops_ = [n.op for n in fn.history[-1].graph.nodes]
    return [p.numpy() for p in params], float(np.median(times[2:])), ops_.count("allreduce_start")


blocking, t_block, n_block = run(tuple(p for p in O2 if p != "bucket_allreduce"))
overlap, t_over, n_over = run(O2)
np.savez(f"{sys.argv[1]}/rank{comm.rank}.npz", *overlap)
np.savez(f"{sys.argv[1]}/blocking{comm.rank}.npz", *blocking)
with open(f"{sys.argv[1]}/rank{comm.rank}.json", "w") as f:
    json.dump({"blocking": t_block, "overlap": t_over, "starts": [n_block, n_over]}, f)
"""


def test_overlapped_step_matches_blocking_on_two_mpi_ranks(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUALFLOW_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    proc = subprocess.run(
        [MPIEXEC, "-n", "2", sys.executable, str(tmp_path / "job.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    ranks = [np.load(tmp_path / f"rank{r}.npz") for r in (0, 1)]
    blocking = np.load(tmp_path / "blocking0.npz")
    for name in ranks[0].files:
        np.testing.assert_array_equal(ranks[0][name], ranks[1][name])
        np.testing.assert_allclose(ranks[0][name], blocking[name], rtol=1e-6, atol=1e-7)
    timing = json.loads((tmp_path / "rank0.json").read_text())
    assert timing["starts"][0] == 0 and timing["starts"][1] > 1
    print(
        f"compiled MLP step, 2 MPI ranks: blocking {timing['blocking'] * 1e3:.2f} ms, "
        f"overlapped {timing['overlap'] * 1e3:.2f} ms"
    )
