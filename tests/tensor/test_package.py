"""The ``dualflow.tensor`` package beside PyTorch's public names: ``dualflow.tensor`` stays the
function ``tensor(data)`` whatever is imported, and ``dualflow.random`` / ``dualflow.sparse`` name
the package's modules."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import types
from pathlib import Path

import dualflow
from dualflow.tensor import core, random, sparse

ROOT = str(Path(__file__).resolve().parents[2])


def test_dualflow_tensor_is_the_function_after_the_package_is_imported() -> None:
    importlib.import_module("dualflow.tensor.methods.shape")
    assert dualflow.tensor is core.tensor and isinstance(dualflow.tensor, types.FunctionType)
    from dualflow import tensor  # the from-import form

    assert tensor([1.0, 2.0]).tolist() == [1.0, 2.0]
    assert sys.modules["dualflow.tensor"].__name__ == "dualflow.tensor"


def test_a_fresh_process_that_imports_the_package_first_keeps_the_function() -> None:
    # import order matters here: the subpackage is imported before dualflow.tensor is read
    code = "import dualflow.nn, dualflow\nprint(type(dualflow.tensor).__name__)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "function"


def test_public_module_names() -> None:
    assert dualflow.random is random and dualflow.sparse is sparse
    assert dualflow.random.Generator is random.Generator
    assert "sparse" in dir(dualflow) and "random" in dir(dualflow)
