"""The issue's goals: ratios within one run, verdicts, busy flags, the side-by-side table, and
``dualflow bench --peers`` end to end with a stand-in peer."""

from __future__ import annotations

import json
import sys

import pytest

from dualflow.bench.cli import main
from dualflow.bench.harness import Measurement
from dualflow.bench.peers import goals, section
from dualflow.bench.peers.goals import GOALS, JAX, TORCH, evaluate, format_table
from dualflow.bench.peers.runner import PEERS
from dualflow.bench.workloads import WORKLOADS


def _row(workload: str, mode: str, ms: float, busy: bool = False) -> Measurement:
    row = Measurement(workload, mode, ms, ms * 0.9, ms * 1.1, 5, 0)
    row.busy = busy
    return row


def test_every_goal_names_a_workload_and_a_peer_that_exist() -> None:
    for workload, workload_goals in GOALS.items():
        assert workload in WORKLOADS
        for goal in workload_goals:
            assert goal.mode in ("eager", "compiled") and goal.factor > 0
            assert {TORCH: "torch", JAX: "jax"}[goal.peer] in PEERS[workload]
    assert set(goals.ISSUE_WORKLOADS) == set(GOALS)


def test_goal_ratios_and_verdicts() -> None:
    rows = [
        _row("elementwise", "compiled", 3.0),
        _row("elementwise", JAX, 5.0),  # 0.6x: within 0.7x JAX (and 1.0x)
        _row("tiny-ops", "eager", 0.6, busy=True),
        _row("tiny-ops", "compiled", 0.2),
        _row("tiny-ops", TORCH, 0.5),  # eager 1.2x torch: misses 1.0x
        _row("small-cnn", "compiled", 100.0),  # no torch row: no verdict
    ]
    got = {(r.workload, r.goal): (r.ratio, r.holds, r.busy) for r in evaluate(rows)}
    (elementwise,) = GOALS["elementwise"]
    assert got == {
        ("elementwise", elementwise.text): (0.6, True, False),
        ("tiny-ops", "≤ JAX"): (None, None, False),
        ("tiny-ops", "eager ≤ 1.0× PyTorch eager"): (pytest.approx(1.2), False, True),
        ("small-cnn", "≤ 1.0× PyTorch eager"): (None, None, False),
        ("small-cnn", "eager ≤ 1.3× PyTorch eager"): (None, None, False),
    }


def test_side_by_side_table_shows_ratios_goals_and_busy() -> None:
    rows = [
        _row("mlp", "eager", 8.0),
        _row("mlp", "compiled", 4.0),
        _row("mlp", TORCH, 5.0, busy=True),
        _row("mlp", JAX, 5.0),
    ]
    text = format_table(rows, ["peers run by x: torch 1; jax 2"], "footer line")
    header, line, note, footer = text.splitlines()
    assert header.split()[:3] == ["workload", "eager", "ms"]
    assert "4.000 (3.600–4.400)" in line and "0.80x" in line and "1.60x" in line
    assert "≤ JAX" in line and "yes" in line and "busy: spread too wide" in line
    assert (note, footer) == ("peers run by x: torch 1; jax 2", "footer line")


def test_a_peer_varying_on_its_own_is_judged_by_its_fast_calls() -> None:
    ours = _row("mlp", "compiled", 4.0)
    jax = Measurement("mlp", JAX, 5.0, 2.0, 9.0, 9, 0, ms_p10=3.0, ms_p90=8.0, varies=True)
    (result,) = evaluate([ours, jax])
    assert result.ratio == pytest.approx(4.0 / 3.0) and result.holds is False  # not 4/5
    line = format_table([ours, jax], [], "footer").splitlines()[1]
    assert "1.33x (vs p10)" in line and "jax jit: varies on an idle machine" in line
    jax.varies = False
    assert evaluate([ours, jax])[0].ratio == pytest.approx(0.8)


def test_bench_peers_end_to_end_with_a_stand_in_peer(tmp_path, monkeypatch, capsys) -> None:
    seen = {}

    def fake_run_peers(names, python, repeats, warmup, idle_wait, retry):
        seen.update(names=list(names), python=python, repeats=repeats("tiny-ops"), wait=idle_wait)
        seen.update(retry=retry)
        jax_row = Measurement("tiny-ops", JAX, 1000.0, 999.0, 1001.0, 3, 0)  # a very slow JAX
        return [jax_row], ["torch peers skipped: no torch", "jax 0.0"]

    monkeypatch.setattr(section, "run_peers", fake_run_peers)
    args = ["--workloads", "tiny-ops", "--peers", "--peers-python", sys.executable]
    args += ["--repeats", "3", "--idle-wait", "0", "--no-chart", "--out", str(tmp_path)]
    assert main([*args, "--attempts", "2"]) == 0
    want = {"names": ["tiny-ops"], "python": sys.executable, "repeats": 3, "wait": 0.0}
    assert seen == {**want, "retry": (0.5, 2)}
    out = capsys.readouterr().out
    assert "compiled/jax" in out and "torch peers skipped: no torch" in out
    data = json.loads((tmp_path / "bench.json").read_text())
    assert (data["results"][-1]["workload"], data["results"][-1]["mode"]) == ("tiny-ops", JAX)
    assert all(r["idle"] is not None for r in data["results"][:-1])  # dualflow's cells
    verdicts = {g["goal"]: g["holds"] for g in data["peers"]["goals"]}
    assert verdicts == {"≤ JAX": True, "eager ≤ 1.0× PyTorch eager": None}
    assert data["run"]["verdict"] in out and isinstance(data["run"]["counts"], bool)


def test_peers_default_to_the_issue_workloads(monkeypatch, tmp_path) -> None:
    ran = {}

    def fake_run(names, *args, **kwargs):
        ran["names"] = list(names)
        return []

    monkeypatch.setattr("dualflow.bench.cli.run", fake_run)
    monkeypatch.setattr(section, "run_peers", lambda *a: ([], []))
    assert main(["--peers", "--no-chart", "--idle-wait", "0", "--out", str(tmp_path)]) == 0
    assert ran["names"] == list(goals.ISSUE_WORKLOADS)


def test_the_elementwise_goal_follows_the_cpus_vector_width(tmp_path) -> None:
    from dualflow.bench.peers.goals import has_avx512

    flags = tmp_path / "cpuinfo"
    flags.write_text("processor : 0\nflags\t\t: fpu sse avx2 avx512f avx512bw\n")
    assert has_avx512(str(flags))
    flags.write_text("processor : 0\nflags\t\t: fpu sse avx2 fma\n")
    assert not has_avx512(str(flags))
    (goal,) = GOALS["elementwise"]
    assert goal.factor == (0.7 if has_avx512() else 1.0) and str(goal.factor) in goal.text
    assert [g.factor for g in GOALS["resnet18"]] == [1.0, 1.3]  # compiled, eager (issue 38)
