"""The bench's ``--passes`` (an extra compiled mode) and ``--compare-to`` (ratios) flags."""

from __future__ import annotations

import json

from dualflow.bench.cli import main
from dualflow.passes.manager import PIPELINES


def test_passes_adds_a_mode_and_compare_to_prints_ratios(tmp_path, capsys) -> None:
    base = ["--workloads", "tiny-ops", "--repeats", "3", "--no-chart"]
    assert main([*base, "--out", str(tmp_path / "a"), "--passes", "dce,cse"]) == 0
    rows = json.loads((tmp_path / "a" / "bench.json").read_text())["results"]
    extra = [r for r in rows if r["mode"] == "compiled[dce,cse]"]
    assert len(extra) == 1 and extra[0]["max_diff"] < 1e-5 and extra[0]["steps"] > 0
    capsys.readouterr()
    old = str(tmp_path / "a" / "bench.json")
    assert main([*base, "--out", str(tmp_path / "b"), "--compare-to", old]) == 0
    out = capsys.readouterr().out
    assert f"ratio to {old}" in out
    assert all(f"tiny-ops {m}" in " ".join(out.split()) for m in ("eager", "compiled"))
    assert out.count("x\n") >= 3


def test_unknown_pass_is_rejected(capsys) -> None:
    assert main(["--workloads", "tiny-ops", "--passes", "nope", "--no-chart"]) == 2
    assert "unknown pass" in capsys.readouterr().err


def test_passes_exact_is_a_bit_identical_mode(tmp_path) -> None:
    base = ["--workloads", "tiny-ops", "--repeats", "3", "--no-chart", "--out", str(tmp_path)]
    assert main([*base, "--passes", "exact"]) == 0
    rows = json.loads((tmp_path / "bench.json").read_text())["results"]
    (exact,) = [r for r in rows if r["mode"] == f"compiled[{','.join(PIPELINES['exact'])}]"]
    assert exact["max_diff"] == 0.0 and exact["steps"] > 0
