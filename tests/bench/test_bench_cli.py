"""The bench command runs, prints its table and writes JSON (timings are not asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dualflow.__main__ import main as dualflow_main
from dualflow.bench import distributed
from dualflow.bench.cli import main
from dualflow.bench.modes import MODES


def test_bench_writes_json_and_table(tmp_path, capsys) -> None:
    code = main(["--workloads", "tiny-ops,mlp", "--repeats", "3", "--out", str(tmp_path)])
    assert code == 0
    table = capsys.readouterr().out
    assert "tiny-ops" in table and "mlp" in table and "eager" in table
    data = json.loads((tmp_path / "bench.json").read_text())
    rows = {(r["workload"], r["mode"]): r for r in data["results"]}
    assert set(rows) == {(w, m) for w in ("tiny-ops", "mlp") for m in MODES}
    assert MODES == ("eager", "compiled-O0", "compiled", "compiled-lazy")
    assert all(r["ms_median"] > 0 and r["repeats"] == 3 for r in rows.values())
    assert rows[("mlp", "eager")]["baseline_ms"] > 0
    assert rows[("mlp", "eager")]["peak_bytes"] > 64 * 1000 * 4  # at least one activation
    for name, mode in [(w, m) for w in ("tiny-ops", "mlp") for m in MODES[1:]]:
        compiled = rows[(name, mode)]
        assert compiled["steps"] > 0 and compiled["compile_ms"] > 0
        # a busy machine's timings are flagged instead of giving a speedup
        assert compiled["speedup"] > 0 if not compiled["noisy"] else compiled["speedup"] is None
        assert compiled["max_diff"] < 1e-5, "compiled results must match eager ones"
    assert "matches eager" in table and "yes" in table


def test_large_workloads_compile_and_match_eager(tmp_path, capsys) -> None:
    names = "elementwise,arith-chain,inference,cnn"
    assert main(["--workloads", names, "--repeats", "3", "--no-chart", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "bench.json").read_text())["results"]
    assert {r["workload"] for r in rows} == set(names.split(","))
    for row in rows:
        assert row["mode"] == "eager" or row["max_diff"] < 1e-5, row
    fused = [r for r in rows if r["mode"] == "compiled" and r["workload"] != "cnn"]
    assert all(r["steps"] == 1 for r in fused[:2]), "each 4M chain fuses into one kernel"


def test_bench_rejects_unknown_workload(capsys) -> None:
    assert main(["--workloads", "nope", "--no-chart"]) == 2
    assert "unknown workloads" in capsys.readouterr().err


def test_dualflow_command_dispatches_bench(tmp_path) -> None:
    args = ["bench", "--workloads", "tiny-ops", "--repeats", "3", "--no-chart"]
    assert dualflow_main([*args, "--out", str(tmp_path)]) == 0
    assert (tmp_path / "bench.json").exists()
    assert dualflow_main(["frobnicate"]) == 2


def test_dualflow_bench_runs_in_a_fresh_process(tmp_path) -> None:
    # `make bench` runs the console script in a new interpreter: nothing may be pre-imported.
    import subprocess
    import sys

    code = "from dualflow.__main__ import main; raise SystemExit(main())"
    args = ["bench", "--workloads", "tiny-ops", "--repeats", "3", "--no-chart", "--out"]
    done = subprocess.run(
        [sys.executable, "-c", code, *args, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "tiny-ops" in done.stdout and "compiled" in done.stdout


needs_mpiexec = pytest.mark.skipif(
    not os.path.exists(distributed.mpiexec_path()), reason="no mpiexec next to sys.executable"
)


@needs_mpiexec
def test_distributed_workload_reports_its_own_rows(tmp_path, capsys) -> None:
    args = ["--workloads", "cnn,distributed", "--repeats", "3", "--no-chart"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "bench.json").read_text())["results"]
    mine = {r["mode"]: r for r in rows if r["workload"] == "distributed"}
    modes = ["eager", "eager no-overlap", "compiled", "compiled no-overlap"]
    assert list(mine) == modes + [f"mlp {m}" for m in modes]  # compiled-O0 is not run for it
    for mode, row in mine.items():
        assert row["matches"] and "ranks agree" in row["note"], mode
        assert "overlap on/off" in row["note"]
    assert mine["compiled"]["max_diff"] < 1e-5 and mine["compiled"]["steps"] > 0
    assert "allreduces/step 1 eager / 1 compiled" in mine["compiled"]["note"]
    assert "allreduces/step 6 eager / 6 compiled" in mine["mlp compiled"]["note"]
    table = capsys.readouterr().out
    assert "note" in table.splitlines()[0] and "distributed  compiled" in table


def test_without_mpiexec_the_workload_is_a_note_row(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(distributed, "mpiexec_path", lambda: str(tmp_path / "no-mpiexec"))
    args = ["--workloads", "distributed", "--no-chart", "--out", str(tmp_path)]
    assert main(args) == 0
    (row,) = json.loads((tmp_path / "bench.json").read_text())["results"]
    assert row["repeats"] == 0 and row["note"].startswith("skipped: no mpiexec")
    assert "skipped: no mpiexec" in capsys.readouterr().out


@needs_mpiexec
def test_allreduce_script_measures_and_counts() -> None:
    command = [sys.executable, "-m", "dualflow.bench.allreduce", "--elements", "1000"]
    done = subprocess.run([*command, "--repeats", "2"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "mpi4py Allreduce (raw)" in done.stdout and "x raw)" in done.stdout
    assert "10 parameters -> 1 all-reduce call(s) eager, 1 in the compiled graph" in done.stdout
