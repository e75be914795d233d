"""Issue 40's layers against PyTorch: the same weights and inputs give the same outputs and
gradients (references from ``make_ported_nn_references.py``: torch 2.13, float64), and the
strict load of PyTorch's state dict checks the parameter names (``module.`` for DataParallel).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import dualflow
from dualflow import nn
from tests.compat import nn_packing
from tests.compat.nn_cases import Case
from tests.compat.ported_nn_cases import CASES

REFS = nn_packing.load(Path(__file__).with_name("ported_nn_references.npz"))


def _ref(prefix: str) -> dict[str, np.ndarray]:
    return {k[len(prefix) :]: v for k, v in REFS.items() if k.startswith(prefix)}


def _indexed(prefix: str) -> list[np.ndarray]:
    found = _ref(prefix)
    return [found[str(i)] for i in range(len(found))]


def _inputs(case: Case) -> tuple[list, dict, list]:
    """Positional and keyword inputs from the reference (float positional ones require grad)."""
    args, kwargs = case.inputs(np.random.default_rng(0))  # the structure only
    stored, leaves = iter(_indexed(f"{case.id}/input/")), []
    for i, value in enumerate(args):
        if value.dtype.kind == "f":
            args[i] = dualflow.tensor(next(stored), requires_grad=True)
            leaves.append(args[i])
    saved = _ref(f"{case.id}/kwarg/")
    kwargs = {k: dualflow.tensor(saved[k]) for k in kwargs}
    return args, kwargs, leaves


def _module(case: Case) -> nn.Module:
    module = case.build(nn).double()
    module.train(case.train)
    assert list(module.state_dict()) == [str(k) for k in REFS[f"{case.id}/keys"]]
    module.load_state_dict(_ref(f"{case.id}/init/"))
    return module


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_layer_matches_torch(case: Case) -> None:
    module = _module(case)
    args, kwargs, leaves = _inputs(case)
    out = module(*args, **kwargs)
    rtol, atol = case.tol
    np.testing.assert_allclose(out.numpy(), REFS[f"{case.id}/output/0"], rtol=rtol, atol=atol)
    (out * REFS[f"{case.id}/cotangent/0"]).sum().backward()
    grads = _ref(f"{case.id}/grad/")
    assert sorted(n for n, _ in module.named_parameters()) == sorted(grads)
    for name, p in module.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), grads[name], rtol=rtol, atol=atol, err_msg=name)
    for t, ref in zip(leaves, _indexed(f"{case.id}/input_grad/"), strict=True):
        np.testing.assert_allclose(t.grad.numpy(), ref, rtol=rtol, atol=atol)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_layer_compiled_training_step_equals_eager(case: Case) -> None:
    """forward, backward and an SGD update compiled give the eager step's loss and parameters."""
    results = []
    for compiled in (False, True):
        module = _module(case)
        args, kwargs, _ = _inputs(case)
        args = [a.detach() if a.dtype.kind == "f" else a for a in args]
        cot = dualflow.tensor(REFS[f"{case.id}/cotangent/0"])
        params = list(module.parameters())
        opt = dualflow.optim.SGD(params, lr=0.1) if params else None

        def step(*inputs, _module=module, _opt=opt, _kw=kwargs, _cot=cot):
            loss = (_module(*inputs, **_kw) * _cot).sum()
            if _opt is not None:
                _opt.zero_grad()
                loss.backward()
                _opt.step()
            return loss

        run = dualflow.compile(step) if compiled else step
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message="dualflow.compile", category=RuntimeWarning)
            losses = [run(*args).item() for _ in range(3)]
        results.append((losses, [p.numpy().copy() for p in params]))
    (eager_losses, eager_params), (losses, params_after) = results
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-12, atol=1e-12)
    for got, want in zip(params_after, eager_params, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
