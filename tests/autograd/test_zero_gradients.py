"""Symbolic zero gradients (``ops.creation.ZeroGradient``): relu_grad's derivative in ``y`` is
zero, so a gradient penalty through ReLUs runs no backward below that path (JAX's symbolic
zeros), hands out zeros where PyTorch does (grad(), .grad), stays exact against central
differences, and compiled equals eager."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import ops
from dualflow.bench.workloads import build_gradient_penalty_mlp
from dualflow.ops import OPS


def _leaf(values: object) -> dualflow.Tensor:
    return dualflow.tensor(np.asarray(values, np.float64), requires_grad=True)


def _counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """A list that grows by one at every eager forward of op ``name``."""
    calls: list[int] = []
    op = OPS[name]
    forward = op.forward

    def counted(*args, **kwargs):
        calls.append(1)
        return forward(*args, **kwargs)

    monkeypatch.setattr(op, "forward", counted)
    return calls


def test_a_relu_gradient_penalty_runs_only_the_needed_gemms(monkeypatch) -> None:
    # g = dL/dx of an MLP 784-h-h-10, then the penalty's gradients: eagerly 3 GEMMs forward, 3
    # back to x and 5 for the second order (W1, W2 and W3's gradients and the two adjoints
    # between); the zeros relu_grad's y used to get flowed through 3 more (14 in all)
    built = build_gradient_penalty_mlp(np.random.default_rng(0), batch=4, hidden=16)
    calls = _counting(monkeypatch, "matmul")
    grads = built["step"]()
    assert len(calls) == 11
    assert [g is None for g in grads] == [False, False, False, False, False, True]
    np.testing.assert_array_equal(grads[1].numpy(), 0)  # b1: zeros, as PyTorch
    np.testing.assert_array_equal(grads[3].numpy(), 0)


def _penalty(params: list, x: dualflow.Tensor, split: bool) -> dualflow.Tensor:
    w1, b1, w2 = params
    h = x @ w1 + b1
    if split:  # a two-output op whose outputs get a symbolic zero and a real gradient
        a, b = ops.split(h, 2, axis=1)
        h = ops.concat([ops.relu(a), ops.tanh(b)], axis=1)
    else:
        h = ops.relu(h)
    (g,) = dualflow.grad((h @ w2).sum(), x, create_graph=True)
    return (g**2).sum()


@pytest.mark.parametrize("split", [False, True])
def test_penalty_gradients_match_central_differences(split: bool) -> None:
    rng = np.random.default_rng(2)
    values = [rng.normal(size=s) for s in ((3, 6), (6,), (6, 2))]
    x = _leaf(rng.normal(size=(5, 3)))
    params = [_leaf(v) for v in values]
    got = dualflow.grad(_penalty(params, x, split), params)
    for k, value in enumerate(values):
        numeric = np.zeros_like(value)
        for i in np.ndindex(value.shape):
            signs = []
            for sign in (1, -1):
                moved = [v.copy() for v in values]
                moved[k][i] += sign * 1e-6
                signs.append(_penalty([_leaf(v) for v in moved], x, split).item())
            numeric[i] = (signs[0] - signs[1]) / 2e-6
        np.testing.assert_allclose(got[k].numpy(), numeric, rtol=1e-5, atol=1e-7)


def test_backward_into_grad_gives_zeros_where_only_a_zero_arrived() -> None:
    rng = np.random.default_rng(3)
    x, w1, b1, w2 = (_leaf(rng.normal(size=s)) for s in ((4, 3), (3, 5), (5,), (5, 2)))
    (g,) = dualflow.grad((ops.relu(x @ w1 + b1) @ w2).sum(), x, create_graph=True)
    (g**2).sum().backward()
    np.testing.assert_array_equal(b1.grad.numpy(), np.zeros(5))
    assert np.abs(w1.grad.numpy()).sum() > 0 and np.abs(w2.grad.numpy()).sum() > 0


def test_compiled_penalty_step_equals_eager() -> None:
    def results(compiled: bool) -> list[np.ndarray]:
        built = build_gradient_penalty_mlp(np.random.default_rng(4), batch=8, hidden=32)
        step = dualflow.compile(built["step"]) if compiled else built["step"]
        out = [step() for _ in range(3)][-1]
        if compiled:
            assert step.stats().plan_runs >= 1 and step.stats().eager_fallbacks == 0
        return [g.numpy() for g in out if g is not None]

    for a, b in zip(results(False), results(True), strict=True):
        np.testing.assert_array_equal(a, b)


def test_compiled_backward_hands_out_the_same_zeros() -> None:
    # only symbolic zeros reach b1 and x: their .grad are zeros (made inside the compiled step)
    def results(compiled: bool) -> list[np.ndarray]:
        rng = np.random.default_rng(5)
        x, w1, b1, w2 = (_leaf(rng.normal(size=s)) for s in ((4, 3), (3, 5), (5,), (5, 2)))

        def step() -> None:
            (g,) = dualflow.grad((ops.relu(x @ w1 + b1) @ w2).sum(), x, create_graph=True)
            (g**2).sum().backward()

        fn = dualflow.compile(step) if compiled else step
        for _ in range(3):
            for t in (x, w1, b1, w2):  # each call starts without gradients
                t.grad = None
            fn()
        if compiled:
            assert fn.stats().plan_runs >= 1 and fn.stats().eager_fallbacks == 0
        return [t.grad.numpy() for t in (x, w1, b1, w2)]

    eager, compiled = results(False), results(True)
    np.testing.assert_array_equal(eager[0], np.zeros((4, 3)))
    np.testing.assert_array_equal(eager[2], np.zeros(5))
    for a, b in zip(eager, compiled, strict=True):
        np.testing.assert_array_equal(a, b)
