"""The GPU test harness on a CPU machine: ``gpu`` tests skip with a reason naming what is missing,
and tests/gpu/run_on_device.sh (run once on a GPU machine) is valid, executable bash.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import gpu_skip_reason

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "gpu" / "run_on_device.sh"


@pytest.fixture
def fresh_reason() -> Iterator[None]:
    gpu_skip_reason.cache_clear()  # the answer is cached per process; tests fake other machines
    yield
    gpu_skip_reason.cache_clear()


def _fake_cupy(count: int | None, error: Exception | None = None) -> types.ModuleType:
    def get_device_count() -> int:
        if error is not None:
            raise error
        return count  # type: ignore[return-value]

    module = types.ModuleType("cupy")
    runtime = types.SimpleNamespace(getDeviceCount=get_device_count)
    module.cuda = types.SimpleNamespace(runtime=runtime)  # type: ignore[attr-defined]
    return module


def test_reason_without_cupy(fresh_reason: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    reason = gpu_skip_reason()
    assert reason is not None and reason.startswith("cupy is not importable")
    assert "pip install 'dualflow[cuda12]'" in reason


def test_reason_with_no_device(fresh_reason: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(0))
    assert gpu_skip_reason() == "cupy.cuda.runtime.getDeviceCount() == 0: no CUDA device visible"


def test_reason_when_the_driver_fails(fresh_reason: None, monkeypatch: pytest.MonkeyPatch) -> None:
    error = RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient")
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(None, error))
    reason = gpu_skip_reason()
    assert reason is not None and "getDeviceCount() failed" in reason
    assert "RuntimeError: cudaErrorInsufficientDriver" in reason


def test_no_reason_with_a_device(fresh_reason: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(2))
    assert gpu_skip_reason() is None


def test_gpu_tests_skip_cleanly_here() -> None:
    """Collect and run every gpu test in a child pytest: all skipped, none failing or erroring."""
    reason = gpu_skip_reason()
    if reason is None:
        pytest.skip("a GPU is present: the gpu tests run for real")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-o", "addopts=--strict-markers", "-m", "gpu", "-q", "-rs"]
        + ["-p", "no:cacheprovider", "tests/gpu", "tests/kernels/test_fused_kernels_cuda.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    summary = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "skipped" in summary and "passed" not in summary and "error" not in summary, summary
    assert f"gpu: {reason}" in done.stdout


def test_device_script_is_executable_bash() -> None:
    assert SCRIPT.exists()
    assert os.access(SCRIPT, os.X_OK) and SCRIPT.stat().st_mode & stat.S_IXUSR
    text = SCRIPT.read_text()
    assert text.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in text
    bash = shutil.which("bash")
    assert bash is not None
    done = subprocess.run([bash, "-n", str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_device_script_runs_the_requested_stages() -> None:
    text = SCRIPT.read_text()
    for needed in (
        'OUT="${OUT:-./gpu-out}"',
        "summary.txt",
        '-e ".[dev,cuda12]"',
        'python3 -c "import $needed"',  # the offline device image: no install at all
        "nvidia-smi",
        "-m gpu tests/gpu tests/runtime",
        'bench --device cuda:0 --quick --out "$OUT/bench"',
        '--workloads elementwise-64m,resnet50 --out "$OUT/bench-gpu"',
        "timeout --kill-after",
    ):
        assert needed in text, needed
    stages = [line.split()[1] for line in text.splitlines() if line.startswith("stage ")]
    assert stages == ["install", "cuda-libs", "device-info", "pytest-gpu", "bench", "bench-gpu"]
    limits = [int(line.split()[2]) for line in text.splitlines() if line.startswith("stage ")]
    assert max(limits) <= 250 and "GPU_RUN_SECONDS:-470" in text  # a deadline under 8 minutes
