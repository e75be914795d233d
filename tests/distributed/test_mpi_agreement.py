"""Ranks that diverge under real MPI (``mpiexec``) end the job with an error naming the divergence
on every rank, instead of hanging; an uneven last batch and a guard flipping on one rank train
correctly. Each job is ``tests/distributed/mpi_scenarios.py``; assertions are on the error text,
never on timing (the machine may be loaded).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from tests.distributed.helpers import MPIEXEC, run_scenario

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(not os.path.exists(MPIEXEC), reason="no mpiexec next to sys.executable"),
]


def _disagreement(stderr: str, rank: int) -> str:
    """The divergence message as rank ``rank`` raised or printed it."""
    messages = re.findall(r"ranks disagree at collective #\d+.*?this is rank \d+\)", stderr, re.S)
    mine = [m for m in messages if m.endswith(f"this is rank {rank})")]
    assert mine, f"rank {rank} did not report the divergence:\n{stderr[-3000:]}"
    return mine[0]


@pytest.mark.parametrize("how", ["exit", "end"])
def test_a_rank_that_exits_ends_the_job_with_the_divergence_on_every_rank(
    tmp_path: Path, how: str
) -> None:
    proc = run_scenario("diverge", tmp_path, how, "eager")
    assert proc.returncode != 0
    for rank in (0, 1):
        message = _disagreement(proc.stderr, rank)
        assert re.search(r"rank 0: #\d+ layout check of the multi-node optimizer", message)
        assert re.search(r"rank 1: #\d+ exit \(sys.exit\(\) or the end of the script\)", message)
        assert "a rank is exiting" in message
    assert "rank 0 finished" not in proc.stdout


def test_three_ranks_name_which_rank_exits(tmp_path: Path) -> None:
    proc = run_scenario("diverge", tmp_path, "exit", "eager", ranks=3)
    assert proc.returncode != 0
    message = _disagreement(proc.stderr, 2)
    assert re.search(r"ranks 0, 1: #(\d+) layout check", message)
    assert re.search(r"rank 2: #\d+ exit", message)


@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_a_caught_exception_that_skips_a_step_ends_the_job(tmp_path: Path, mode: str) -> None:
    proc = run_scenario("diverge", tmp_path, "caught", mode)
    assert proc.returncode != 0
    assert "rank 1 skipped a step: a bad batch on this rank" in proc.stdout
    message = _disagreement(proc.stderr, 0)
    if mode == "compiled":  # rank 1's compiled call told the others why it failed
        assert re.search(r"rank 1: #\d+ compiled call of .*ValueError: a bad batch", message)
    else:  # a whole iteration skipped: one iteration short when rank 1's script ends
        assert re.search(r"rank 0: #\d+ layout check", message)
        assert re.search(r"rank 1: #\d+ exit \(.*\) after 5 optimizer steps", message)


def test_a_branch_skipping_opt_step_on_one_rank_ends_the_job(tmp_path: Path) -> None:
    # rank 1 skips step() after its backward averaged: the next layout check sees its count
    proc = run_scenario("diverge", tmp_path, "skip", "eager")
    assert proc.returncode != 0
    for rank in (0, 1):
        message = _disagreement(proc.stderr, rank)
        assert re.search(
            r"rank 0: #\d+ layout check of the multi-node optimizer \(step 3\)", message
        )
        assert re.search(
            r"rank 1: #\d+ layout check of the multi-node optimizer \(step 2\)", message
        )
    assert (
        proc.stderr.count(
            "the ranks are at different steps (step() calls so far, in rank order: [3, 2])"
        )
        == 2
    )


def test_a_compiled_branch_skipping_opt_step_ends_the_job(tmp_path: Path) -> None:
    # the skipping call runs eagerly on both ranks (plans count steps like eager runs); its
    # closing vote finds the step counts differ: the job ends in that call, not a later one
    proc = run_scenario("diverge", tmp_path, "skip", "compiled")
    assert proc.returncode != 0
    for rank in (0, 1):
        message = _disagreement(proc.stderr, rank)
        assert re.search(
            r"rank 0: #\d+ end of compiled call of .* after 3 optimizer steps", message
        )
        assert re.search(
            r"rank 1: #\d+ end of compiled call of .* after 2 optimizer steps", message
        )
        assert "a step() skipped on some ranks?" in message


def test_the_watchdog_names_the_collective_and_the_rank_that_did_not_arrive(
    tmp_path: Path,
) -> None:
    proc = run_scenario("diverge", tmp_path, "sleep", "eager", timeout=3.0)
    assert proc.returncode != 0
    lines = [s for s in proc.stderr.splitlines() if "did not complete within" in s]
    assert lines, proc.stderr[-4000:]  # what the job said instead (seen once in a CI run)
    line = lines[0]
    assert re.search(r"\[dualflow rank 0\] collective #\d+ layout check of the multi-node", line)
    assert "did not complete within 3 s" in line
    assert re.search(
        r"not arrived: rank 1 \(last finished #\d+ allreduce mean float32\[67\] bucket 0", line
    )
    assert "Aborting the job" in line


def test_sigkill_on_one_rank_ends_the_job(tmp_path: Path) -> None:
    proc = run_scenario("diverge", tmp_path, "sigkill", "eager")
    assert proc.returncode != 0
    assert "rank 0 finished" not in proc.stdout


def test_mismatched_parameter_counts_give_a_clear_error(tmp_path: Path) -> None:
    proc = run_scenario("mismatch", tmp_path)
    assert proc.returncode != 0
    assert "rank 1's parameters differ from rank 0's at parameter #0" in proc.stderr
    assert "(4 vs 3 parameters)" in proc.stderr


def test_an_uneven_last_batch_trains_in_a_compiled_fit(tmp_path: Path) -> None:
    proc = run_scenario("uneven_fit", tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ranks = [np.load(tmp_path / f"rank{r}.npz") for r in (0, 1)]
    for name in ranks[0].files:
        if "running_" not in name and "num_batches" not in name:  # BN statistics are per rank
            np.testing.assert_array_equal(ranks[0][name], ranks[1][name])
        if name.startswith("compiled/"):
            eager = ranks[0][name.replace("compiled/", "eager/")]
            np.testing.assert_allclose(ranks[0][name], eager, rtol=1e-5, atol=1e-6)
    stats = [json.loads((tmp_path / f"stats{r}.json").read_text()) for r in (0, 1)]
    assert stats[0]["eager_fallbacks"] >= 1  # rank 0 ran the short batches' calls eagerly...
    assert stats[1]["traces"] > stats[0]["traces"]  # ...while rank 1 traced them
    assert stats[0]["plan_runs"] > 0 and stats[1]["plan_runs"] > 0


def test_a_guard_flipping_on_one_rank_trains_like_eager(tmp_path: Path) -> None:
    proc = run_scenario("guard_flip", tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ranks = [np.load(tmp_path / f"rank{r}.npz") for r in (0, 1)]
    n = len(ranks[0].files) // 2
    for i in range(2 * n):
        np.testing.assert_array_equal(ranks[0][f"arr_{i}"], ranks[1][f"arr_{i}"])
    for i in range(n):
        np.testing.assert_allclose(ranks[0][f"arr_{n + i}"], ranks[0][f"arr_{i}"], rtol=1e-5)
    stats = [json.loads((tmp_path / f"stats{r}.json").read_text()) for r in (0, 1)]
    assert stats[1]["guard_failures"] >= 1 and stats[0]["eager_fallbacks"] >= 1
