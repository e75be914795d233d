"""Division with rounding, roll, tensor_split and adaptive_avg_pool1d against PyTorch: every
case of ``pyops_cases`` gives PyTorch's outputs and gradients (references from
``make_tensor_references.py pyops``: torch 2.13, float64), and compiled calls equal eager ones.
"""

from __future__ import annotations

import pytest

from tests.compat.pyops_cases import CASES
from tests.compat.tensor_check import check_against_torch, check_compiled, load, params

REFS = load("pyops")


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_matches_torch(case) -> None:
    check_against_torch(case, REFS)


@pytest.mark.parametrize("case", params(CASES))
def test_compiled_equals_eager(case) -> None:
    check_compiled(case, REFS)
