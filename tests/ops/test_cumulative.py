"""The cumulative ops' numerics: cumprod's exact gradients with zeros anywhere (against the
product rule written out), logcumsumexp's backward without overflow for values far apart, and
cummax's gradient at the returned index."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import dualflow
from dualflow import ops


def _cumprod_grad_ref(x: np.ndarray, gy: np.ndarray) -> np.ndarray:
    """d/dx_i of sum_j gy_j prod_{m<=j} x_m, one product per (i, j): no division."""
    n = len(x)
    return np.array(
        [
            sum(gy[j] * math.prod(x[m] for m in range(j + 1) if m != i) for j in range(i, n))
            for i in range(n)
        ]
    )


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from([0.0, 0.0, 1.5, -0.5, 2.0, -3.0, 0.25]), min_size=1, max_size=7),
    st.integers(0, 2**31),
)
def test_cumprod_gradient_is_the_product_rule_with_zeros(values: list, seed: int) -> None:
    x_np = np.array(values)
    gy = np.random.default_rng(seed).normal(size=x_np.shape)
    x = dualflow.tensor(x_np, requires_grad=True)
    (ops.cumprod(x, 0) * dualflow.tensor(gy)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), _cumprod_grad_ref(x_np, gy), rtol=1e-12, atol=1e-12)


def test_logcumsumexp_backward_stays_finite_for_values_far_apart() -> None:
    x_np = np.array([-5000.0, 0.0, 3.0, 4000.0, 4000.0, -100.0])
    gy = np.array([1.0, -2.0, 0.5, 1.0, -1.0, 3.0])
    for dtype in ("float64", "float32"):
        x = dualflow.tensor(x_np.astype(dtype), requires_grad=True)
        y = ops.logcumsumexp(x, 0)
        (y * dualflow.tensor(gy.astype(dtype))).sum().backward()
        # gx_j = sum_{i >= j} gy_i exp(x_j - y_i), each weight computed on its own in float64
        y64 = np.logaddexp.accumulate(x_np)
        want = [sum(gy[i] * np.exp(x_np[j] - y64[i]) for i in range(j, 6)) for j in range(6)]
        assert np.isfinite(y.numpy()).all() and np.isfinite(x.grad.numpy()).all()
        # float32 rounds x + (log-space sum) at magnitude 4000: 2.4e-4 absolute in the exponent
        # (torch 2.13 gives the same 1.9999065 at position 3)
        rtol = 1e-12 if dtype == "float64" else 1e-4
        np.testing.assert_allclose(x.grad.numpy(), want, rtol=rtol, atol=1e-6, err_msg=dtype)


def test_cummax_gradient_goes_to_the_latest_equal_maximum() -> None:
    x = dualflow.tensor([1.0, 3.0, 2.0, 3.0, 0.0], requires_grad=True)
    values, indices = x.cummax(0)
    assert indices.tolist() == [0, 1, 1, 3, 3]
    values.sum().backward()
    assert x.grad.tolist() == [1.0, 2.0, 0.0, 2.0, 0.0]


def test_compiled_training_step_with_cumulative_ops_equals_eager() -> None:
    w_np = np.random.default_rng(1).normal(size=(4, 5))

    def step(w: dualflow.Tensor, x: dualflow.Tensor) -> dualflow.Tensor:
        h = (x * w).cumsum(1) + (x * w).cumprod(-1) + (x * w).logcumsumexp(0)
        loss = (h + x.cummin(0).values).sum()
        loss.backward()
        return loss

    results = []
    for fn in (step, dualflow.compile(step)):
        for _ in range(2):
            w = dualflow.tensor(w_np, requires_grad=True)
            x = dualflow.tensor(np.linspace(-1.0, 1.0, 20).reshape(4, 5))
            results.append((fn(w, x).item(), w.grad.numpy()))
    for loss, grad in results[1:]:
        assert loss == results[0][0]
        np.testing.assert_array_equal(grad, results[0][1])
