"""Optimizers against PyTorch: the same gradients give the same parameters and state, step by step.

References from ``make_optim_references.py`` (torch 2.13), float64 and float32.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dualflow
from dualflow import optim
from dualflow.nn import Parameter
from tests.compat import nn_packing
from tests.compat.optim_cases import CASES, case_id, problem

REFS = nn_packing.load(Path(__file__).with_name("optim_references.npz"))
TOLERANCES = {"float64": (1e-12, 1e-14), "float32": (2e-6, 1e-7)}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(("name", "kwargs"), CASES, ids=[case_id(*c) for c in CASES])
def test_optimizer_matches_torch(name: str, kwargs: dict, dtype: str) -> None:
    params0, grads = problem(dtype)
    params = [Parameter(p.copy()) for p in params0]
    opt = getattr(optim, name)(params, **kwargs)
    prefix = f"{case_id(name, kwargs)}/{dtype}/"
    rtol, atol = TOLERANCES[dtype]
    for step, step_grads in enumerate(grads):
        for p, g in zip(params, step_grads):
            p.grad = dualflow.tensor(g)
        opt.step()
        for i, p in enumerate(params):
            assert p.dtype == np.dtype(dtype)
            expected = REFS[prefix + f"param{i}/step{step}"]
            np.testing.assert_allclose(p.numpy(), expected, rtol=rtol, atol=atol)
    for i, p in enumerate(params):
        theirs = {
            k.rsplit("/", 1)[1]: v for k, v in REFS.items() if k.startswith(prefix + f"state{i}/")
        }
        assert set(opt.state[p]) == set(theirs), (set(opt.state[p]), set(theirs))
        for key, value in theirs.items():
            np.testing.assert_allclose(opt.state[p][key].numpy(), value, rtol=rtol, atol=atol)
