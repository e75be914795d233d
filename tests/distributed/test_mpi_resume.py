"""A compiled data-parallel ``fit`` checkpointed from rank 0, killed mid-epoch (SIGKILL) and
resumed on both ranks: every rank restores exactly what it had (parameters, optimizer state, its
own random generator, its own loader position, its BatchNorm statistics, its metrics) and the
run ends with the parameters of the uninterrupted one, bit for bit.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dualflow
from tests.distributed.helpers import MPIEXEC, run_scenario

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(not os.path.exists(MPIEXEC), reason="no mpiexec next to sys.executable"),
]


def _assert_identical(a: Any, b: Any, where: str = "state") -> None:
    """Equal structure and bit-identical leaves (arrays compared with their dtype)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            _assert_identical(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_identical(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray) or hasattr(a, "numpy"):
        x, y = (
            np.asarray(a.numpy() if hasattr(a, "numpy") else a),
            np.asarray(b.numpy() if hasattr(b, "numpy") else b),
        )
        assert x.dtype == y.dtype, where
        np.testing.assert_array_equal(x, y, err_msg=where)
    else:
        assert a == b, where


def test_a_killed_compiled_fit_resumes_on_every_rank(tmp_path: Path) -> None:
    full = run_scenario("resume", tmp_path, "full")
    assert full.returncode == 0, full.stderr[-3000:]
    killed = run_scenario("resume", tmp_path, "killed")
    assert killed.returncode != 0  # rank 0 was SIGKILLed after step 8; the job died with it
    assert not (tmp_path / "killed0.npz").exists()
    resumed = run_scenario("resume", tmp_path, "resumed")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    for rank in (0, 1):
        saved = dualflow.load(tmp_path / f"saved{rank}.npz")
        restored = dualflow.load(tmp_path / f"restored{rank}.npz")
        _assert_identical(saved, restored)
        assert restored["loop"]["global_step"] == 6 and restored["loop"]["batch"] == 1
    other = dualflow.load(tmp_path / "restored1.npz")
    mine = dualflow.load(tmp_path / "restored0.npz")
    assert not np.array_equal(mine["rng"]["cpu"], other["rng"]["cpu"])  # per-rank generators
    assert mine["loader"]["seed"] != other["loader"]["seed"]  # per-rank loader order
    ends = {
        stage: [np.load(tmp_path / f"{stage}{r}.npz") for r in (0, 1)]
        for stage in ("full", "resumed")
    }
    for name in ends["full"][0].files:
        if "running_" not in name and "num_batches" not in name:
            np.testing.assert_array_equal(ends["resumed"][0][name], ends["resumed"][1][name])
        for rank in (0, 1):  # bit for bit, as the uninterrupted run
            np.testing.assert_array_equal(ends["resumed"][rank][name], ends["full"][rank][name])
