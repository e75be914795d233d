"""Check one compatibility case against its PyTorch reference, eagerly and compiled.

Eager: outputs (values, dtypes, shapes) and the gradients of ``sum(output * cotangent)`` equal
torch's; a case torch refused raises here too. Compiled: outputs, gradients (backward through
the compiled call) and the arguments left behind (in-place methods write into them) equal the
eager call's, over three calls (one trace, then plan runs).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import errors
from tests.compat import tensor_packing
from tests.compat.tensor_harness import Case, flatten, is_tensor, rng_for, to_numpy

DUALFLOW = SimpleNamespace(
    F=dualflow.nn.functional,
    nn=dualflow.nn,
    float32=dualflow.float32,
    float64=dualflow.float64,
    long=dualflow.long,
    torch=dualflow,
)
# What a call PyTorch refuses may raise here: dualflow's typed errors, or PyTorch's own types.
REFUSALS = (errors.ShapeError, errors.DTypeError, RuntimeError, TypeError, IndexError, ValueError)


def load(name: str) -> dict[str, np.ndarray]:
    return tensor_packing.load(Path(__file__).with_name(f"{name}_references.npz"))


def _args(case: Case, refs: dict, grad: bool) -> tuple[list[Any], dict[int, Any]]:
    values = case.inputs(rng_for(case.id))  # the structure and Python scalars
    wrt = case.grad_positions(values)
    args, leaves = [], {}
    for i, value in enumerate(values):
        if isinstance(value, np.ndarray):
            stored = refs[f"{case.id}/input/{i}"]
            value = dualflow.tensor(stored.copy(), requires_grad=grad and i in wrt)
            if grad and i in wrt:
                leaves[i] = value
        args.append(value)
    return args, leaves


def _backward(case: Case, refs: dict, outs: list[Any]) -> None:
    terms = []
    for k, out in enumerate(outs):
        key = f"{case.id}/cot/{k}"
        if key in refs and is_tensor(out) and out.requires_grad:
            terms.append((out * refs[key].astype(out.dtype)).sum())
    if terms:
        sum(terms[1:], terms[0]).backward()


def _grads(leaves: dict[int, Any]) -> dict[int, np.ndarray]:
    return {
        i: np.zeros(t.shape, t.dtype) if t.grad is None else t.grad.numpy()
        for i, t in leaves.items()
    }


def _close(got: np.ndarray, want: np.ndarray, tol: tuple[float, float], what: str) -> None:
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got, want, rtol=tol[0], atol=tol[1], err_msg=what)


def check_against_torch(case: Case, refs: dict) -> None:
    """The eager call gives PyTorch's outputs and gradients (or raises where PyTorch did)."""
    prefix = case.id + "/"
    args, leaves = _args(case, refs, grad=True)
    if prefix + "error" in refs:
        with pytest.raises(REFUSALS):
            case.fn(DUALFLOW, *args)
        return
    outs = flatten(case.fn(DUALFLOW, *args))
    expected = sum(k.startswith(prefix + "out/") for k in refs)
    assert len(outs) == expected, f"{len(outs)} outputs, PyTorch gave {expected}"
    for k, out in enumerate(outs):
        _close(to_numpy(out), refs[f"{prefix}out/{k}"], case.tol, f"output {k}")
    _backward(case, refs, outs)
    for i, grad in _grads(leaves).items():
        _close(grad, refs[f"{prefix}grad/{i}"], case.tol, f"gradient of input {i}")


def _run(fn: Any, case: Case, refs: dict) -> tuple[list, dict, list]:
    args, leaves = _args(case, refs, grad=True)
    outs = flatten(fn(*args))
    _backward(case, refs, outs)
    after = [to_numpy(a) for a in args if is_tensor(a)]
    return [to_numpy(o) for o in outs], _grads(leaves), after


def params(cases: list[Case]) -> list[Any]:
    """The cases as pytest params, known compiled failures marked as strict xfails."""
    return [
        pytest.param(
            case,
            id=case.id,
            marks=[pytest.mark.xfail(strict=True, reason=case.compiled_xfail)]
            if case.compiled_xfail
            else [],
        )
        for case in cases
    ]


def check_compiled(case: Case, refs: dict) -> None:
    """Compiled calls return, differentiate and leave behind what the eager call does."""
    if not case.compiled or f"{case.id}/error" in refs:
        pytest.skip("not a tensor-valued call (or an error case)")

    def call(*args: Any) -> Any:
        return case.fn(DUALFLOW, *args)

    want = _run(call, case, refs)
    compiled = dualflow.compile(call)
    for attempt in range(3):
        with warnings.catch_warnings():  # a fallback to eager would test nothing: fail on it
            warnings.filterwarnings("error", message="dualflow.compile", category=RuntimeWarning)
            got = _run(compiled, case, refs)
        for kind, g, w in zip(("output", "gradient", "argument after"), got, want):
            pairs = g.items() if isinstance(g, dict) else enumerate(g)
            assert len(g) == len(w), f"call {attempt}: {len(g)} {kind}s, eager gave {len(w)}"
            for k, value in pairs:
                _close(value, w[k], (1e-12, 1e-12), f"call {attempt}: {kind} {k}")
