"""``examples/convert_torchvision_weights.py``: ``--help`` works without torch, and a
torchvision-style state dict written as ``.npz`` loads into the zoo's model by name.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np

import dualflow
from dualflow.vision import models

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "convert_torchvision_weights.py"


def _script_module() -> object:
    spec = importlib.util.spec_from_file_location("convert_torchvision_weights", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_help_runs_without_torch() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "resnet18" in proc.stdout and "--verify" in proc.stdout


def test_written_npz_loads_by_name(tmp_path: Path) -> None:
    # Stand-in for torchvision's state_dict(): same names, float32 weights, int64 counters.
    dualflow.random.seed(0)
    source = models.mobilenet_v2(10, cifar_stem=True, width=0.25)
    fake = {k: v.numpy() + v.numpy().dtype.type(1) for k, v in source.state_dict().items()}
    arrays = _script_module().to_arrays(fake)
    np.savez(tmp_path / "w.npz", **arrays)
    target = models.mobilenet_v2(10, cifar_stem=True, width=0.25)
    target.load_state_dict(dict(np.load(tmp_path / "w.npz")))
    for key, value in target.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), fake[key], err_msg=key)
