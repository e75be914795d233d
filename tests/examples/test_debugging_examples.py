"""The eager-debugging, compiled-step and compare-modes examples, run with ``--smoke``.

Like ``test_examples.py``, each runs as a script in a fresh interpreter from a temporary
directory; ``compare_modes.py`` also runs in-process once, with every pass verified (conftest).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dualflow.passes import PASSES
from tests.examples.test_examples import EXAMPLES, run_example


def line_of(name: str, marker: str) -> int:
    lines = (EXAMPLES / name).read_text().splitlines()
    return next(i for i, line in enumerate(lines, start=1) if marker in line)


def test_eager_debugging_prints_tensors_and_names_the_bad_lines(tmp_path: Path) -> None:
    out = run_example("eager_debugging.py", cwd=tmp_path)
    assert out.startswith("digits MLP, eager: 1438 train images, batch 32")
    assert re.search(r"flattened\s+shape \(32, 64\)\s+float32", out)
    assert re.search(r"hidden \(ReLU\)\s+shape \(32, 32\)\s+float32\s+min \+0\.0000", out)
    assert re.search(r"d loss/d hidden\s+shape \(32, 32\)", out)
    norm = re.search(r"1\.weight\s+\.grad shape \(32, 64\), norm (\S+)", out).group(1)
    assert float(norm) > 0  # backward filled the first layer's .grad
    first, last = map(float, re.search(r"5 eager steps: loss (\S+) -> (\S+)", out).groups())
    assert last < first
    assert "(Pdb)" not in out  # breakpoint() only with --pdb
    # the shape bug is reported eagerly, at the line that has it
    assert "ShapeError: matmul: inner dimensions differ: (32, 1, 8, 8) @ (64, 32)" in out
    assert f"eager_debugging.py:{line_of('eager_debugging.py', '# shape bug:')}" in out
    # the NaN: silent without debug mode; with it, the compiled graph names the line
    assert "debug off: loss on the bad batch = nan" in out
    assert int(re.search(r"compiled step ran (\d+) times as a graph", out).group(1)) >= 1
    error = re.search(r"debug on, compiled: NumericalError: (.*\n.*)", out).group(1)
    assert error.startswith("log: output contains Inf")
    assert f"eager_debugging.py:{line_of('eager_debugging.py', '# the NaN starts here')}" in error
    assert "parameters untouched by the failed step: True" in out


def test_eager_debugging_pdb_flag_stops_inside_the_step(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DUALFLOW_", "PYTHONBREAK"))}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "eager_debugging.py"), "--smoke", "--pdb"],
        input="p hidden.shape\np first.weight.grad.shape\nc\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "inspect_step()" in proc.stdout and "(Pdb) (32, 32)\n(Pdb) (32, 64)" in proc.stdout
    assert "parameters untouched by the failed step: True" in proc.stdout  # it continued


def test_compiled_training_step_matches_eager_and_explains_itself(tmp_path: Path) -> None:
    out = run_example("compiled_training_step.py", cwd=tmp_path)
    assert out.startswith("digits MLP, compiled step: 320 train images, 2 epochs")
    assert len(re.findall(r"^epoch \d: loss", out, re.MULTILINE)) == 2
    # explain: the single-use first trace (momentum buffers born in it), then the kept one
    assert re.search(r"train_step: \d+ calls, 2 traces, [1-9]\d* plan runs, 0 guard", out)
    assert "'first call', 'state was created during the previous (single-use) trace'" in out
    assert re.search(r"kept trace 0: \d+ nodes, 2 inputs, \d+ captured state tensors", out)
    for name in ("fold", "cse", "dce", "fuse"):
        assert re.search(rf"pass {name}\s+\d+ ->\s+\d+ nodes", out), name
    assert re.search(r"predicted peak \d+ B = \d+ B in \d+ buffers", out)
    eager_ms, graph_ms = map(float, re.search(r"eager (\S+) ms, compiled (\S+) ms", out).groups())
    assert eager_ms > 0 and graph_ms > 0
    diff = float(re.search(r"max \|eager - compiled\| loss over those steps: (\S+)", out).group(1))
    assert diff <= 1e-5  # same start, same batches: the compiled step computes eager's losses
    assert 0.5 < float(re.search(r"test accuracy: (\S+)", out).group(1)) <= 1.0


def test_compare_modes_example_matches_and_blames_the_wrong_pass(tmp_path: Path) -> None:
    out = run_example("compare_modes.py", cwd=tmp_path)  # exit status 0: the checks held
    sections = out.split("== ")[1:]
    assert sections[0].startswith("critic, orders (0, 1, 2)")
    assert "\nmodes match: max abs" in sections[0] and "ok=True" in sections[0]
    assert sections[1].startswith("gradient penalty") and "ok=True" in sections[1]
    assert len(re.findall(r"passes='[^']*'\s+match, max abs", sections[2])) == 5
    bad = sections[3]
    assert bad.startswith("critic with a deliberately wrong fusion pass\nMISMATCH")
    assert "culprit pass: wrong_fuse" in bad
    node = re.search(r"culprit node: (.*)", bad).group(1)
    assert node.startswith("fused -> %")
    assert f"compare_modes.py:{line_of('compare_modes.py', '# the fused region ends here')}" in node


def test_compare_modes_example_in_process_leaves_the_pass_registry_as_it_was(
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = importlib.util.spec_from_file_location(
        "compare_modes_example", EXAMPLES / "compare_modes.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    before = dict(PASSES)
    assert module.main(["--smoke"]) == 0
    assert before == PASSES and "wrong_fuse" not in PASSES
    assert "culprit pass: wrong_fuse" in capsys.readouterr().out
