"""The python-floor peer: the same tiny-op workload and gradients as dualflow's, its child run,
and the table's floor line."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow.bench.harness import Measurement
from dualflow.bench.peers import child, floor_workloads
from dualflow.bench.peers.goals import FLOOR, TORCH, evaluate, floor_lines, format_table
from dualflow.bench.workloads import _tiny_chain


def _row(mode: str, ms: float) -> Measurement:
    return Measurement("tiny-ops", mode, ms, ms, ms, 5, 0)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_floor_computes_dualflows_tiny_op_gradients(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x0, w0 = (rng.standard_normal((16, 16), dtype=np.float32) for _ in range(2))
    x, w = floor_workloads.Var(x0), floor_workloads.Var(w0)
    tape = floor_workloads.Tape()
    floor_gx, floor_gw = tape.grad(floor_workloads.chain(tape, x, w), [x, w])
    assert not tape.entries  # grad() leaves the tape empty for the next step
    xt, wt = (dualflow.tensor(v, requires_grad=True) for v in (x0, w0))
    gx, gw = dualflow.grad(_tiny_chain(xt, wt), [xt, wt])
    # numpy's tanh against dualflow's float32 tanh (within 5 ulp), through 50 ops
    np.testing.assert_allclose(floor_gx, gx.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(floor_gw, gw.numpy(), rtol=1e-4, atol=1e-6)
    assert floor_gx.dtype == floor_gw.dtype == np.float32


def test_the_child_runs_the_floor_with_numpy_as_its_framework() -> None:
    record = child.measure("numpy", "tiny-ops", 3, 1)
    assert record["mode"] == FLOOR and record["version"] == np.__version__
    assert 0 < record["min_ms"] <= record["median_ms"] <= record["max_ms"]
    assert child.measure("numpy", "mlp", 3, 1) == {"skip": "no numpy version of mlp"}


def test_the_table_prints_the_floor_beside_the_eager_goal_and_judges_nothing_by_it() -> None:
    rows = [_row("eager", 3.0), _row(TORCH, 2.0), _row(FLOOR, 1.0)]
    (line,) = floor_lines(rows)
    assert "1.000 ms" in line and "allows 2.000 ms (2.00x the floor)" in line
    assert "takes 3.000 ms (3.00x)" in line
    assert line in format_table(rows, [], "footer").splitlines()
    # the eager goal is still judged against PyTorch only
    (result,) = [r for r in evaluate(rows) if r.goal.startswith("eager")]
    assert result.ratio == pytest.approx(1.5) and result.holds is False
    assert floor_lines([_row("eager", 3.0), _row(TORCH, 2.0)]) == []  # no floor row, no line
