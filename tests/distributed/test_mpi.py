"""Real MPI jobs: ``mpiexec -n 2`` on small scripts (an all-reduce and a data-parallel step, and
a rank that raises, which must abort the whole job instead of hanging).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")
ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(not os.path.exists(MPIEXEC), reason="no mpiexec next to sys.executable"),
]

STEP_SCRIPT = """
import json, sys, time
import numpy as np
import dualflow
from dualflow.distributed import create_communicator
from tests.distributed.helpers import batches, data_parallel

comm = create_communicator("mpi")
x = np.arange(5, dtype=np.float32) * (comm.rank + 1)
summed = comm.allreduce(x)
half = comm.allreduce(x.astype(np.float16), op="mean")
into = comm.allreduce(x, op="mean", out=np.empty_like(x))  # straight into out, no copy
big = np.ones(10_000_000, np.float32)
comm.barrier()
start = time.perf_counter()
for _ in range(3):
    comm.allreduce(big, out=big)
seconds = (time.perf_counter() - start) / 3
data = batches(3, 4, comm.size)
params = [p.tolist() for p in data_parallel(comm, data, 4, compile=True)[0]]
# One file per rank: two ranks printing at once can interleave on a shared stdout.
with open(f"{sys.argv[1]}/rank{comm.rank}.json", "w") as f:
    json.dump({"rank": comm.rank, "sum": summed.tolist(), "half": half.tolist(),
               "into": into.tolist(), "big": float(big[0]), "seconds": seconds,
               "params": params}, f)
"""

RAISE_SCRIPT = """
import time
from dualflow.distributed import create_communicator

comm = create_communicator("mpi")
if comm.rank == 1:
    raise RuntimeError("rank 1 fails on purpose")
comm.barrier()  # rank 0 would wait here forever without the abort hook
time.sleep(100)
"""


def _mpirun(tmp_path: Path, script: str) -> subprocess.CompletedProcess:
    path = tmp_path / "job.py"
    path.write_text(script)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [MPIEXEC, "-n", "2", sys.executable, str(path), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=ROOT,
    )


def test_allreduce_and_a_compiled_data_parallel_step(tmp_path: Path) -> None:
    proc = _mpirun(tmp_path, STEP_SCRIPT)
    assert proc.returncode == 0, proc.stderr
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["rank"] for r in results] == [0, 1]
    for r in results:
        assert r["sum"] == [0.0, 3.0, 6.0, 9.0, 12.0]
        assert r["half"] == r["into"] == [0.0, 1.5, 3.0, 4.5, 6.0]
        assert r["big"] == 8.0  # three in-place sums over two ranks: 1 -> 2 -> 4 -> 8
    assert results[0]["params"] == results[1]["params"]
    print(f"10M float32 allreduce, 2 ranks: {results[0]['seconds'] * 1e3:.1f} ms")


def test_an_exception_on_one_rank_aborts_the_job(tmp_path: Path) -> None:
    proc = _mpirun(tmp_path, RAISE_SCRIPT)
    assert proc.returncode != 0
    assert "[dualflow rank 1] uncaught exception" in proc.stderr
    assert "rank 1 fails on purpose" in proc.stderr


@pytest.mark.parametrize("mode", [(), ("--compile", "--grad-dtype", "float16")])
def test_the_distributed_example_trains(mode: tuple[str, ...]) -> None:
    example = ROOT / "examples" / "train_digits_distributed.py"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUALFLOW_")}
    proc = subprocess.run(
        [MPIEXEC, "-n", "2", sys.executable, str(example), "--smoke", *mode],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("digits CNN, 2 ranks (mpi, ")
    assert "parameters identical on all 2 ranks" in proc.stdout
    for rank in (0, 1):
        assert float(re.search(rf"rank {rank}: (\S+) images/s", proc.stdout).group(1)) > 0
    accuracy = float(proc.stdout.split("test accuracy: ")[1].split()[0])
    assert 0.5 < accuracy <= 1.0
