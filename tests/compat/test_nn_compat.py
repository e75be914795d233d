"""Layers against PyTorch: the same weights and inputs give the same outputs and gradients.

References come from ``make_nn_references.py`` (torch 2.13, float64), stored in
``nn_references.npz``; torch is not needed here. Loading each PyTorch state dict (strictly, in
PyTorch's key order) is itself the check that parameter names and shapes agree.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dualflow
from dualflow import nn
from tests.compat import nn_packing
from tests.compat.nn_cases import CASES, Case, tied

REFS = nn_packing.load(Path(__file__).with_name("nn_references.npz"))


def _ref(prefix: str) -> dict[str, np.ndarray]:
    return {k[len(prefix) :]: v for k, v in REFS.items() if k.startswith(prefix)}


def _indexed(prefix: str) -> list[np.ndarray]:
    found = _ref(prefix)
    return [found[str(i)] for i in range(len(found))]


def _to_dualflow(value, inputs: list):
    if isinstance(value, tuple):
        return tuple(_to_dualflow(v, inputs) for v in value)
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        t = dualflow.tensor(value, requires_grad=True)
        inputs.append(t)
        return t
    return value


def _flatten(out) -> list:
    if isinstance(out, tuple | list):
        return [t for o in out for t in _flatten(o)]
    return [] if out is None else [out]


def _inputs(case: Case) -> tuple[list, dict]:
    """The case's inputs in the generation order (the reference stores them by position)."""
    rng = np.random.default_rng(0)
    args, kwargs = case.inputs(rng)  # only the structure; values come from the npz
    stored = iter(_indexed(f"{case.id}/input/"))

    def refill(value):
        if isinstance(value, tuple):
            return tuple(refill(v) for v in value)
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            return next(stored)
        return value

    args = [refill(a) for a in args]
    saved_kwargs = _ref(f"{case.id}/kwarg/")
    kwargs = {k: (saved_kwargs[k] if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}
    return args, kwargs


def run(case: Case):
    module = case.build(nn).double()
    module.train(case.train)
    if case.hooks is not None:
        case.hooks(module)
    keys = [str(k) for k in REFS[f"{case.id}/keys"]]
    assert list(module.state_dict()) == keys
    module.load_state_dict(_ref(f"{case.id}/init/"))
    args, kwargs = _inputs(case)
    inputs: list = []
    outs = _flatten(module(*[_to_dualflow(a, inputs) for a in args], **kwargs))
    return module, inputs, outs


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_layer_matches_torch(case: Case) -> None:
    module, inputs, outs = run(case)
    expected = _indexed(f"{case.id}/output/")
    assert len(outs) == len(expected)
    rtol, atol = case.tol
    for out, ref in zip(outs, expected):
        np.testing.assert_allclose(out.numpy(), ref, rtol=rtol, atol=atol)
    loss = sum((out * c).sum() for out, c in zip(outs, _indexed(f"{case.id}/cotangent/")))
    loss.backward()
    grads = _ref(f"{case.id}/grad/")
    assert sorted(n for n, _ in module.named_parameters()) == sorted(grads)
    for name, p in module.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), grads[name], rtol=rtol, atol=atol, err_msg=name)
    for t, ref in zip(inputs, _indexed(f"{case.id}/input_grad/"), strict=True):
        np.testing.assert_allclose(t.grad.numpy(), ref, rtol=rtol, atol=atol)
    for name, ref in _ref(f"{case.id}/after/").items():  # running statistics
        np.testing.assert_allclose(module.state_dict()[name].numpy(), ref, rtol=rtol, atol=atol)


def test_tied_weights_state_dict_keeps_the_alias_key_and_loads_strictly() -> None:
    model = tied(nn)
    assert list(model.state_dict()) == [str(k) for k in REFS["tied/keys"]]
    assert [n for n, _ in model.named_parameters()] == ["0.weight"]  # the shared tensor once
    value = np.arange(15.0).reshape(5, 3).astype(np.float32)
    result = model.load_state_dict({"0.weight": value, "1.weight": value})
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert model[1].weight is model[0].weight
    np.testing.assert_array_equal(model[1].weight.numpy(), value)
