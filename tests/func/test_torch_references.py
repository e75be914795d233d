"""dualflow.func against torch.func in float64 (references stored by make_func_references.py),
eagerly and under ``@dualflow.compile``; each case once more against finite differences.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import func
from dualflow.nn import functional as nnf
from tests.func import func_cases

REFERENCES = np.load(Path(__file__).resolve().parent / "func_references.npz")


def _values() -> dict[str, Any]:
    return {k[3:]: dualflow.tensor(REFERENCES[k]) for k in REFERENCES.files if k.startswith("in/")}


def _want(name: str) -> list[np.ndarray]:
    count = sum(1 for k in REFERENCES.files if k.startswith(f"{name}/"))
    return [REFERENCES[f"{name}/{i}"] for i in range(count)]


def _check(got: list, want: list) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == np.float64
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", list(func_cases.CASES))
def test_eager_matches_torch_func(name: str) -> None:
    _check(func_cases.run(func, nnf, name, _values()), _want(name))


@pytest.mark.parametrize("name", list(func_cases.CASES))
def test_compiled_matches_torch_func(name: str) -> None:
    values = _values()
    names = list(values)

    @dualflow.compile(fallback="error")
    def step(*arrays: Any) -> list:
        return func_cases.run(func, nnf, name, dict(zip(names, arrays)))

    for _ in range(2):  # the trace, then the plan
        _check(step(*values.values()), _want(name))
    assert step.stats().plan_runs == 1


def test_reference_gradients_match_finite_differences() -> None:
    """The stored torch gradients themselves agree with central differences (so a shared bug
    in both frameworks' formulas would still be caught)."""
    values = {k: v.numpy() for k, v in _values().items()}
    args = [values[n] for n in func_cases.MLP_ARGS]

    def loss(*arrays: np.ndarray) -> float:
        ts = [dualflow.tensor(a) for a in arrays]
        return func_cases.mlp_loss(nnf, *ts).item()

    for k, want in enumerate(_want("mlp_grad")):
        numeric = np.zeros_like(args[k])
        for idx in np.ndindex(args[k].shape):
            plus = [a.copy() for a in args]
            minus = [a.copy() for a in args]
            plus[k][idx] += 1e-6
            minus[k][idx] -= 1e-6
            numeric[idx] = (loss(*plus) - loss(*minus)) / 2e-6
        np.testing.assert_allclose(want, numeric, rtol=1e-5, atol=1e-8)
