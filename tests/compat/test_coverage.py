"""``scripts/pytorch_coverage.py``: it finds PyTorch names through a file's imports (torch or a
port's dualflow), tells Tensor methods from other modules' names, and every name the committed
PyTorch programs and ports use exists in dualflow."""

from __future__ import annotations

import ast
import importlib.util
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("coverage", ROOT / "scripts" / "pytorch_coverage.py")
coverage = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(coverage)

SOURCE = """
import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F
import dualflow.optim as optim
from dualflow.nn.init import xavier_uniform_
import dualflow.ops

x = torch.zeros(2, 3).view(-1)
y = F.relu(nn.Linear(3, 3)(x)).T
np.round(y.numpy(), 3)
optim.SGD([], lr=0.1), optim.lr_scheduler.StepLR
xavier_uniform_(w)
torch.nn.functional.gelu(x), torch.nn.init.zeros_(w)
dualflow.ops.relu(x)
{"a": 1}.values()
torch.no_such_thing(x)
"""


def _uses(source: str) -> Counter:
    methods, attributes = coverage.load_tensor_names()
    scanner = coverage.Scanner(coverage.aliases(ast.parse(source)), methods, attributes)
    scanner.visit(ast.parse(source))
    return scanner.uses


def test_scanner_finds_names_through_imports() -> None:
    uses = _uses(SOURCE)
    assert uses == Counter(
        {
            ("torch", "zeros"): 1,
            ("Tensor", "view"): 1,
            ("torch.nn.functional", "relu"): 1,
            ("torch.nn", "Linear"): 1,
            ("Tensor", "T"): 1,
            ("Tensor", "numpy"): 1,
            ("torch.optim", "SGD"): 1,
            ("torch.optim.lr_scheduler", "StepLR"): 1,
            ("torch.nn.init", "xavier_uniform_"): 1,
            ("torch.nn.functional", "gelu"): 1,
            ("torch.nn.init", "zeros_"): 1,
            ("torch", "no_such_thing"): 1,
        }
    )


def test_report_weights_by_use_and_lists_what_is_missing() -> None:
    result = coverage.report(_uses(SOURCE))
    assert result["uses"] == 12 and result["names"] == 12
    assert result["missing"] == [("torch.no_such_thing", 1)]
    assert result["share"] == 11 / 12
    assert result["namespaces"]["F"] == {"uses": 2, "found": 2, "names": 2, "names_found": 2}


def test_every_name_the_programs_and_ports_use_exists(capsys) -> None:
    paths = [str(ROOT / "tests" / "compat" / "programs"), str(ROOT / "examples" / "ports")]
    assert coverage.main([*paths, "--strict"]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "100.0% of uses" in out
