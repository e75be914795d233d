"""Issue 36 under real MPI, in one ``mpiexec -n 2`` job (``mpi_scenarios.promises``): mismatched
bcast/allreduce arguments raise on both ranks with the loopback communicator's text, a late
failure in a compiled call fails both ranks in that call, ``comm.timeout = "5"`` is refused, and
a rank stuck in Python while the other exits ends the job after the timeout.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest

from dualflow.distributed import run_loopback
from tests.distributed.helpers import MPIEXEC, run_scenario
from tests.distributed.mpi_scenarios import _mismatches

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(not os.path.exists(MPIEXEC), reason="no mpiexec next to sys.executable"),
]


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, list[dict]]:
    out = tmp_path_factory.mktemp("promises")
    proc = run_scenario("promises", out, timeout=3.0)
    seen = [json.loads((out / f"promises{r}.json").read_text()) for r in (0, 1)]
    return proc, seen


def _loopback_mismatches() -> list[dict]:
    return run_loopback(_mismatches, 2)


def test_mismatched_arguments_raise_on_both_ranks_as_on_loopback(job: tuple) -> None:
    _, seen = job
    loopback = _loopback_mismatches()
    for rank in (0, 1):
        mpi = seen[rank]["mismatch"]
        assert mpi.pop("then") == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]  # the group still works
        for name, text in mpi.items():
            assert text.endswith(f"this is rank {rank})"), (name, text)
            # the same words on every backend, call sites and all
            same = text.replace("of the mpi communicator", "of the loopback communicator")
            assert same == loopback[rank][name], name
        assert "rank 0: #1 bcast root=0 float64[6]" in mpi["bcast_dtype"]
        assert "rank 1: #1 bcast root=0 float32[6]" in mpi["bcast_dtype"]
        assert "float64[2,3]" in mpi["bcast_shape"] and "float64[3,2]" in mpi["bcast_shape"]
        assert "rank 1: #3 bcast root=0 object" in mpi["bcast_none"]
        assert "float32[3]" in mpi["allreduce"] and "float64[3]" in mpi["allreduce"]
        assert "reduction 'mean' needs a float array, got int64" in mpi["mean_of_ints"]


@pytest.mark.parametrize(("key", "fail_at"), [("late_first", 0), ("late_third", 2)])
def test_a_late_failure_fails_both_ranks_in_that_call(job: tuple, key: str, fail_at: int) -> None:
    _, seen = job
    rank0, rank1 = seen[0][key], seen[1][key]
    assert rank0[:fail_at] == rank1[:fail_at] == ["ok"] * fail_at
    assert rank1[fail_at] == "ValueError: a late failure on this rank"
    assert re.match(r"CommunicatorError: rank 1 failed in a compiled call", rank0[fail_at])
    if fail_at == 0:  # the first call votes too late to undo rank 0's run: never a silent
        for later in rank0[1:] + rank1[1:]:  # commit again
            assert later.startswith("CollectiveMismatch: ranks disagree"), later
    else:  # every rank undid the failed call: they go on in step
        assert rank0[fail_at + 1 :] == rank1[fail_at + 1 :] == ["ok"] * (len(rank0) - fail_at - 1)


def test_a_bad_timeout_is_refused(job: tuple) -> None:
    _, seen = job
    for rank in (0, 1):
        assert seen[rank]["timeout"].startswith(
            "ConfigError: MpiCommunicator.timeout='5' must be a finite number of seconds > 0"
        )


def test_the_exit_check_honours_the_timeout(job: tuple) -> None:
    proc, _ = job
    assert proc.returncode != 0
    line = next(s for s in proc.stderr.splitlines() if "did not complete within" in s)
    assert re.search(r"\[dualflow rank 0\] collective #\d+ exit \(sys.exit\(\)", line)
    assert "did not complete within 3 s" in line and "not arrived: rank 1" in line
