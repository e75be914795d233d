"""The peers runner: fresh child processes, the one marked JSON line, skip notes, thread env."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from dualflow.bench.peers import child, runner
from dualflow.bench.peers.runner import PEERS, parse_result, probe, run_peer, run_peers
from dualflow.bench.workloads import WORKLOADS

FAKE = """
import json, os, sys
framework, workload, repeats, warmup = sys.argv[1:]
print("some framework chatter")
print("DUALFLOW_PEER_RESULT " + json.dumps({"median_ms": 9.0, "min_ms": 1.0, "max_ms": 99.0}))
if workload == "-":
    record = {"probe": True, "version": "9.9"}
else:
    env = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONPATH")}
    record = {"median_ms": 2.0, "min_ms": 1.5, "max_ms": 2.5, "mode": framework + " fake",
              "repeats": int(repeats), "argv": [workload, warmup], "env": env}
print("DUALFLOW_PEER_RESULT " + json.dumps(record))
print("trailing output", file=sys.stderr)
"""


def _script(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "fake_child.py"
    path.write_text(text)
    return path


def _importable(module: str) -> bool:
    done = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True)
    return done.returncode == 0


def test_run_peer_parses_the_last_marked_line_of_a_fresh_process(tmp_path) -> None:
    fake = _script(tmp_path, FAKE)
    row = run_peer(sys.executable, "torch", "mlp", 7, 3, child=fake)
    assert (row.workload, row.mode, row.repeats) == ("mlp", "torch fake", 7)
    assert (row.ms_median, row.ms_min, row.ms_max) == (2.0, 1.5, 2.5)
    assert row.note is None


def test_the_child_gets_two_threads_and_no_pythonpath(tmp_path, monkeypatch) -> None:
    fake = _script(tmp_path, FAKE)
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    done = subprocess.run(
        [sys.executable, str(fake), "jax", "mlp", "1", "1"],
        capture_output=True,
        text=True,
        env=runner.peer_env(),
        check=True,
    )
    env = parse_result(done.stdout)["env"]
    assert env == {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2", "PYTHONPATH": None}
    assert "intra_op_parallelism_threads=2" in runner.peer_env()["XLA_FLAGS"]


def test_a_marked_line_is_parsed_as_json_never_executed(tmp_path) -> None:
    flag = tmp_path / "executed"
    payload = f"__import__('pathlib').Path({str(flag)!r}).touch()"
    fake = _script(tmp_path, f"print('DUALFLOW_PEER_RESULT ' + {payload!r})\n")
    row = run_peer(sys.executable, "torch", "mlp", 3, 1, child=fake)
    assert row.repeats == 0 and row.note.startswith("failed: ")
    assert not flag.exists()


@pytest.mark.parametrize(
    ("stdout", "message"),
    [
        ("no marker here\n", "no DUALFLOW_PEER_RESULT line"),
        ("DUALFLOW_PEER_RESULT [1, 2]\n", "not a JSON object"),
        ('DUALFLOW_PEER_RESULT {"median_ms": NaN, "min_ms": 1, "max_ms": 2}', "median_ms"),
        ('DUALFLOW_PEER_RESULT {"median_ms": 1, "min_ms": -1, "max_ms": 2}', "min_ms"),
        ('DUALFLOW_PEER_RESULT {"median_ms": "1", "min_ms": 1, "max_ms": 2}', "median_ms"),
    ],
)
def test_bad_results_are_rejected(stdout: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_result(stdout)


def test_a_crashing_peer_is_a_failed_note_row(tmp_path) -> None:
    fake = _script(tmp_path, "import sys\nprint('boom', file=sys.stderr)\nsys.exit(3)\n")
    row = run_peer(sys.executable, "jax", "mlp", 3, 1, child=fake)
    assert row.repeats == 0
    assert (
        row.note.startswith("failed: exit 3: no DUALFLOW_PEER_RESULT line") and "boom" in row.note
    )


def test_run_peers_probes_each_framework_once_and_gates_each_cell(tmp_path) -> None:
    fake = _script(tmp_path, FAKE)
    rows, notes = run_peers(
        ["resnet18", "cnn", "mlp"],
        sys.executable,
        lambda n: 4,
        lambda n: 1,
        idle_wait=0.0,
        child=fake,
    )
    assert notes == ["torch 9.9", "jax 9.9"]
    # resnet18 has no JAX peer, cnn no peer at all
    assert [(r.workload, r.mode) for r in rows] == [
        ("resnet18", "torch fake"),
        ("mlp", "torch fake"),
        ("mlp", "jax fake"),
    ]
    assert all(r.idle is not None and 0.0 <= r.others_cpu <= 1.0 for r in rows)
    # peer rows say so, and carry others' share over the child's run (None: too short to tick)
    assert all(r.peer and (r.others_during is None or 0.0 <= r.others_during <= 1.0) for r in rows)


@pytest.mark.skipif(_importable("torch"), reason="torch is importable here")
def test_a_missing_framework_is_skipped_with_a_one_line_note() -> None:
    note = probe(sys.executable, "torch")
    assert note.startswith("torch peers skipped: torch is not importable by ")
    assert "\n" not in note
    rows, notes = run_peers(["resnet18"], sys.executable, lambda n: 3, lambda n: 1)
    assert rows == [] and notes == [note]
    row = run_peer(sys.executable, "torch", "mlp", 3, 1)
    assert row.repeats == 0 and row.note.startswith("skipped: torch is not importable")


def test_a_missing_interpreter_is_a_skip_note_not_an_error() -> None:
    rows, notes = run_peers(["mlp"], "/nonexistent/python3", lambda n: 3, lambda n: 1)
    assert (
        rows == []
        and all(n.endswith("No such file or directory: '/nonexistent/python3'") for n in notes)
        and len(notes) == 2
    )


def test_the_child_times_and_reports_errors_as_records(capsys) -> None:
    assert child.main(["nope", "mlp", "1", "1"]) == 0
    line = capsys.readouterr().out
    assert line.startswith(child.MARKER) and json.loads(line[len(child.MARKER) :]) == {
        "error": "unknown peer framework 'nope'"
    }
    timed = child.time_step(lambda: 1, lambda out: None, repeats=4, warmup=1)
    assert timed["repeats"] == 4 and timed["min_ms"] <= timed["median_ms"] <= timed["max_ms"]


def _workload_keys(module: str) -> set[str]:
    path = Path(runner.__file__).with_name(f"{module}.py")
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "WORKLOADS":
            return {key.value for key in node.value.keys}
    raise AssertionError(f"no WORKLOADS in {path}")


@pytest.mark.parametrize(("framework", "module"), list(child.MODULES.items()))
def test_peers_table_matches_the_peer_modules(framework: str, module: str) -> None:
    keys = _workload_keys(module)
    assert keys == {name for name, frameworks in PEERS.items() if framework in frameworks}
    assert keys <= set(WORKLOADS)


def test_peer_modules_import_no_dualflow() -> None:
    # They run under another interpreter that need not have dualflow's dependencies.
    for name in ("child", *child.MODULES.values()):
        tree = ast.parse(Path(runner.__file__).with_name(f"{name}.py").read_text())
        imported = {
            alias.name.split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        } | {
            node.module.split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module
        }
        assert "dualflow" not in imported, name


def test_the_child_keeps_each_result_until_the_next_replaces_it() -> None:
    # as dualflow's cells do (and ``out = step()`` in a loop): the next step's output is
    # allocated while the last one is alive, in both frameworks alike
    class Output:
        alive = peak = 0

        def __init__(self) -> None:
            Output.alive += 1
            Output.peak = max(Output.peak, Output.alive)

        def __del__(self) -> None:
            Output.alive -= 1

    result = child.time_step(Output, lambda out: None, repeats=4, warmup=2)
    assert Output.peak == 2 and result["repeats"] == 4
    assert result["min_ms"] <= result["p10_ms"] <= result["p90_ms"] <= result["max_ms"]
