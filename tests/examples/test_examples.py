"""Every example runs as a script with ``--smoke`` and prints what it is about (a few seconds each).

Each runs in a fresh interpreter (``sys.executable``), from a temporary directory, exactly as a
user would start it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, *args: str, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUALFLOW_")}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name), "--smoke", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _line_of(name: str, marker: str) -> int:
    lines = (EXAMPLES / name).read_text().splitlines()
    return next(i for i, line in enumerate(lines, start=1) if marker in line)


@pytest.mark.parametrize("name", ["train_digits_cnn.py", "train_digits_mlp.py"])
@pytest.mark.parametrize("mode", [(), ("--compile",)], ids=["eager", "compiled"])
def test_digits_examples_train(name: str, mode: tuple[str, ...], tmp_path: Path) -> None:
    out = run_example(name, *mode, "--log-path", str(tmp_path / "log.jsonl"), cwd=tmp_path)
    assert ("compiled" if mode else "eager") in out.splitlines()[0]
    first, last = map(float, re.search(r"train loss (\S+) -> (\S+) \(decreased\)", out).groups())
    assert last < first
    accuracy = float(re.search(r"test accuracy: (\S+)", out).group(1))
    assert 0.5 < accuracy <= 1.0  # a smoke run is short, but it does learn
    assert "epoch time:" in out
    assert (tmp_path / "log.jsonl").read_text().count('"event": "epoch"') >= 2


def test_mlp_example_checkpoints_and_resumes(tmp_path: Path) -> None:
    ckpt = str(tmp_path / "mlp.npz")
    full = run_example("train_digits_mlp.py", "--epochs", "3", cwd=tmp_path)
    run_example("train_digits_mlp.py", "--epochs", "2", "--checkpoint", ckpt, cwd=tmp_path)
    resumed = run_example("train_digits_mlp.py", "--epochs", "3", "--resume", ckpt, cwd=tmp_path)
    # The resumed run trained only epoch 3, yet reports exactly the uninterrupted run's numbers.
    for pattern in (r"train loss .*", r"test accuracy: \S+", r"epoch 3: loss \S+ acc \S+"):
        assert re.search(pattern, resumed).group() == re.search(pattern, full).group()


def test_distributed_example_runs_as_one_loopback_rank(tmp_path: Path) -> None:
    # The mpiexec runs live in tests/distributed/test_mpi.py; this one needs no MPI.
    out = run_example("train_digits_distributed.py", "--communicator", "loopback", cwd=tmp_path)
    assert out.startswith("digits CNN, 1 ranks (loopback, eager)")
    assert float(re.search(r"rank 0: (\S+) images/s", out).group(1)) > 0
    assert "parameters identical on all 1 ranks" in out
    assert 0.5 < float(re.search(r"test accuracy: (\S+)", out).group(1)) <= 1.0


def test_gradient_penalty_agrees_eager_and_compiled(tmp_path: Path) -> None:
    out = run_example("gradient_penalty.py", "--compile", cwd=tmp_path)
    assert "gradient penalty" in out
    assert "eager and compiled agree: True" in out
    # the first trace is single-use (Adam creates its state in it), the second is reused
    assert re.search(r"compiled: 2 trace\(s\), [1-9]\d* plan runs", out)


def test_debug_nan_names_the_op_and_the_examples_line(tmp_path: Path) -> None:
    out = run_example("debug_nan.py", cwd=tmp_path)
    assert "debug off: loss = nan" in out
    log_line = _line_of("debug_nan.py", "# the NaN is born here")
    sqrt_line = _line_of("debug_nan.py", "# its gradient is Inf")
    assert "NumericalError: log: output contains NaN" in out
    assert f"debug_nan.py:{log_line}" in out
    assert "NumericalError: sqrt: gradient contains Inf" in out
    assert f"debug_nan.py:{sqrt_line}" in out
