"""``dualflow/_installed.py``: what ``dualflow/__init__`` installs for lower layers (the eager
interpreter, the random ops' generator source, ``Tensor.backward``'s engine), loaded at first use.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import dualflow
from dualflow import _installed
from dualflow.autograd.eager import EAGER
from dualflow.autograd.engine import backward
from dualflow.tensor.random import default_generator_for

ROOT = str(Path(__file__).resolve().parents[1])


def test_the_package_installs_each_default() -> None:
    assert _installed.installed("interpreter") is EAGER
    assert _installed.installed("generator_source") is default_generator_for
    assert _installed.installed("backward") is backward


def test_a_loader_runs_once_and_a_new_install_replaces_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_installed, "_loaders", {})
    monkeypatch.setattr(_installed, "_loaded", {})
    calls = []
    _installed.install("thing", lambda: calls.append(1) or len(calls))
    assert _installed.installed("thing") == 1 and _installed.installed("thing") == 1
    _installed.install("thing", lambda: "other")
    assert _installed.installed("thing") == "other" and calls == [1]
    with pytest.raises(RuntimeError, match="no default 'missing' is installed"):
        _installed.installed("missing")


LAYERS_ONLY = """
import sys, types
pkg = types.ModuleType("dualflow"); pkg.__path__ = [{root!r} + "/dualflow"]
sys.modules["dualflow"] = pkg  # the layers alone, without dualflow/__init__.py
import numpy as np
from dualflow import ops
assert "dualflow.autograd" not in sys.modules  # ops imports no layer above it
try:
    ops.add(np.ones(2), np.ones(2))
except RuntimeError as exc:
    print(exc)
"""


def test_layers_imported_without_the_package_say_what_is_missing() -> None:
    out = subprocess.run(
        [sys.executable, "-c", LAYERS_ONLY.format(root=ROOT)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "no default 'interpreter' is installed" in out.stdout
    assert "import dualflow first" in out.stdout


def test_ops_run_eagerly_and_draw_from_the_default_generator() -> None:
    dualflow.random.seed(3)
    first = dualflow.ops.dropout(dualflow.ones(8), 0.5).tolist()
    dualflow.random.seed(3)
    assert dualflow.ops.dropout(dualflow.ones(8), 0.5).tolist() == first
