"""clip_grad_norm: total 2-, 1- and inf-norms, scaling, shared gradients, dtypes."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dualflow
from dualflow.nn import Parameter
from dualflow.optim import clip_grad_norm


def params_with_grads(*grads: list[float], dtype: str = "float64") -> list[Parameter]:
    params = []
    for g in grads:
        p = Parameter(np.zeros(len(g), dtype))
        p.grad = dualflow.tensor(np.array(g, dtype))
        params.append(p)
    return params


def test_two_norm_over_all_grads_and_scaling() -> None:
    params = params_with_grads([3.0, 0.0], [0.0, 4.0, 12.0])  # total norm 13
    total = clip_grad_norm(params, max_norm=2.6)
    assert total.shape == () and total.item() == 13.0
    scale = 2.6 / (13.0 + 1e-6)
    np.testing.assert_allclose(params[0].grad.numpy(), [3 * scale, 0], rtol=1e-15)
    np.testing.assert_allclose(params[1].grad.numpy(), [0, 4 * scale, 12 * scale], rtol=1e-15)


def test_inf_norm() -> None:
    params = params_with_grads([1.0, -7.0], [2.0])
    total = clip_grad_norm(params, max_norm=3.5, norm_type=math.inf)
    assert total.item() == 7.0
    np.testing.assert_allclose(params[0].grad.numpy(), np.array([1.0, -7.0]) * 3.5 / (7 + 1e-6))


def test_one_norm() -> None:
    params = params_with_grads([1.0, -2.0], [3.0])
    assert clip_grad_norm(params, max_norm=100.0, norm_type=1).item() == 6.0


def test_small_grads_are_left_unchanged() -> None:
    params = params_with_grads([0.3, 0.4])
    assert clip_grad_norm(params, max_norm=1.0).item() == 0.5
    assert params[0].grad.tolist() == [0.3, 0.4]


def test_a_gradient_shared_by_two_params_is_scaled_once_each() -> None:
    a, b = Parameter(np.zeros(2)), Parameter(np.zeros(2))
    (a + b).sum().backward()  # the engine hands both the same gradient tensor
    assert a.grad is b.grad
    total = clip_grad_norm([a, b], max_norm=1.0)
    assert total.item() == 2.0
    scale = 1.0 / (2.0 + 1e-6)
    np.testing.assert_allclose(a.grad.numpy(), [scale, scale], rtol=1e-15)
    np.testing.assert_allclose(b.grad.numpy(), [scale, scale], rtol=1e-15)


def test_float32_grads_stay_float32_and_missing_grads_are_ignored() -> None:
    params = params_with_grads([3.0, 4.0], dtype="float32") + [Parameter(np.zeros(2, np.float32))]
    total = clip_grad_norm(params, max_norm=1.0)
    assert total.dtype == np.float32 and params[0].grad.dtype == np.float32
    assert params[1].grad is None
    np.testing.assert_allclose(params[0].grad.numpy(), [0.6, 0.8], rtol=1e-6)


def test_no_grads_and_bad_norm_type() -> None:
    assert clip_grad_norm([Parameter(np.zeros(2))], 1.0).item() == 0.0
    with pytest.raises(ValueError, match="norm_type"):
        clip_grad_norm(params_with_grads([1.0]), 1.0, norm_type=0)
