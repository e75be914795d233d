"""Compiled double backward: a gradient-penalty training step and a Hessian-vector product equal
eager (the eager engine runs under the tracer, so both are one code path).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import ops, optim
from dualflow.nn import Parameter
from tests.tracer.helpers import assert_same, check_all_traces, check_interpret_matches_plan, tol

DTYPES = pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])


def _params(dtype: Any, seed: int = 0) -> list[Parameter]:
    rng = np.random.default_rng(seed)
    shapes = [(6, 3), (6,), (1, 6), (1,)]
    return [Parameter((rng.normal(size=s) * 0.5).astype(dtype)) for s in shapes]


def _mlp(params: list, x: Any) -> Any:
    w1, b1, w2, b2 = params
    return ops.linear(ops.tanh(ops.linear(x, w1, b1)), w2, b2)


def _penalty_step(params: list, opt: Any, use_backward: bool) -> Any:
    def step(x: Any) -> Any:
        opt.zero_grad()
        loss = (_mlp(params, x) ** 2).mean()
        (g,) = dualflow.grad(loss, x, create_graph=True)
        total = loss + (g * g).sum()
        if use_backward:  # also writes x.grad: x is a leaf that requires grad
            total.backward()
        else:
            for p, gp in zip(params, dualflow.grad(total, params)):
                p.grad = gp
        opt.step()
        return total.detach()

    return step


@DTYPES
@pytest.mark.parametrize("use_backward", [True, False], ids=["backward", "grad"])
def test_gradient_penalty_step_equals_eager(dtype: Any, use_backward: bool) -> None:
    rng = np.random.default_rng(3)
    data = [rng.normal(size=(5, 3)).astype(dtype) for _ in range(3)]
    runs = []
    for compiled_side in (False, True):
        params = _params(dtype)
        step = _penalty_step(params, optim.SGD(params, lr=0.1), use_backward)
        fn = dualflow.compile(step, fallback="error") if compiled_side else step
        losses = [fn(dualflow.tensor(x, requires_grad=True)) for x in data]
        runs.append((losses, [p.numpy().copy() for p in params], fn))
    (want_losses, want_params, _), (losses, got_params, fn) = runs
    assert_same(losses, want_losses, **tol(dtype))
    assert_same(got_params, want_params, **tol(dtype))
    assert fn.stats().plan_runs == 2
    check_all_traces(fn)


def _hvp(params: list) -> Any:
    def hvp(x: Any, vs: list) -> Any:
        loss = (_mlp(params, x) ** 2).sum()
        grads = dualflow.grad(loss, params, create_graph=True)
        dot = sum((g * v).sum() for g, v in zip(grads, vs))
        return list(dualflow.grad(dot, params))

    return hvp


@DTYPES
def test_hessian_vector_product_equals_eager(dtype: Any) -> None:
    params = _params(dtype, seed=1)
    hvp = _hvp(params)
    compiled = dualflow.compile(hvp, fallback="error")
    rng = np.random.default_rng(4)
    for _ in range(3):
        x = dualflow.tensor(rng.normal(size=(4, 3)).astype(dtype))
        vs = [dualflow.tensor(rng.normal(size=p.shape).astype(dtype)) for p in params]
        assert_same(compiled(x, vs), hvp(x, vs), **tol(dtype))
    assert compiled.stats().plan_runs == 2
    check_all_traces(compiled)
    check_interpret_matches_plan(compiled, (x, vs))


def test_hessian_vector_product_matches_finite_differences() -> None:
    """The compiled HVP is the real second derivative, not just self-consistent."""
    params = _params(np.float64, seed=2)
    compiled = dualflow.compile(_hvp(params), fallback="error")
    rng = np.random.default_rng(5)
    x = dualflow.tensor(rng.normal(size=(4, 3)))
    vs = [dualflow.tensor(rng.normal(size=p.shape)) for p in params]
    compiled(x, vs)
    got = compiled(x, vs)

    def grads_at(shift: float) -> list[np.ndarray]:
        shifted = [Parameter(p.numpy() + shift * v.numpy()) for p, v in zip(params, vs)]
        loss = (_mlp(shifted, x) ** 2).sum()
        return [g.numpy() for g in dualflow.grad(loss, shifted)]

    eps = 1e-6
    plus, minus = grads_at(eps), grads_at(-eps)
    for g, a, b in zip(got, plus, minus):
        np.testing.assert_allclose(g.numpy(), (a - b) / (2 * eps), rtol=1e-5, atol=1e-7)
