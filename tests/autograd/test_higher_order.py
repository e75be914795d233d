"""create_graph=True: differentiable gradients, second derivatives and Hessian-vector products."""

from __future__ import annotations

import numpy as np

import dualflow
from dualflow import ops


def _leaf(values: object) -> dualflow.Tensor:
    return dualflow.tensor(np.asarray(values, np.float64), requires_grad=True)


def test_second_derivative_of_cube_is_6x() -> None:
    x = _leaf([-1.5, 0.5, 2.0])
    (g,) = dualflow.grad((x * x * x).sum(), x, create_graph=True)
    assert g.requires_grad and g.creator is not None
    np.testing.assert_allclose(g.numpy(), 3 * x.numpy() ** 2, rtol=1e-12)
    (gg,) = dualflow.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), 6 * x.numpy(), rtol=1e-12)


def test_second_derivative_through_power_op() -> None:
    x = _leaf([0.5, 2.0])
    (g,) = dualflow.grad((x**3).sum(), x, create_graph=True)
    (gg,) = dualflow.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), 6 * x.numpy(), rtol=1e-12)


def test_third_derivative_of_sin() -> None:
    x = _leaf([0.3, 1.1])
    (g1,) = dualflow.grad(ops.sin(x).sum(), x, create_graph=True)
    (g2,) = dualflow.grad(g1.sum(), x, create_graph=True)
    (g3,) = dualflow.grad(g2.sum(), x)
    np.testing.assert_allclose(g3.numpy(), -np.cos(x.numpy()), rtol=1e-12)


def test_without_create_graph_gradients_are_constants() -> None:
    x = _leaf([1.0, 2.0])
    (g,) = dualflow.grad((x * x * x).sum(), x)
    assert not g.requires_grad and g.creator is None


def test_backward_with_create_graph_keeps_the_graph() -> None:
    x = _leaf([1.0, 2.0])
    y = (x * x * x).sum()
    y.backward(create_graph=True)
    assert x.grad.requires_grad
    g = x.grad
    x.grad = None  # break the x -> grad -> graph -> x cycle before differentiating again
    (gg,) = dualflow.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), 6 * x.numpy())


def test_mixed_partial_derivative() -> None:
    x = _leaf([1.0, 2.0])
    y = _leaf([3.0, -1.0])
    (gx,) = dualflow.grad((x * x * y).sum(), x, create_graph=True)  # 2xy
    (gxy,) = dualflow.grad(gx.sum(), y)  # 2x
    np.testing.assert_allclose(gxy.numpy(), 2 * x.numpy())


# ----- Hessian-vector product of a small MLP ---------------------------------------------------
def _mlp_loss(w1: dualflow.Tensor, w2: dualflow.Tensor, x: np.ndarray) -> dualflow.Tensor:
    h = ops.tanh(ops.matmul(x, w1))
    return ops.tanh(ops.matmul(h, w2)).sum()


def _gradient(w1: np.ndarray, w2: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t1, t2 = _leaf(w1), _leaf(w2)
    g1, g2 = dualflow.grad(_mlp_loss(t1, t2, x), [t1, t2])
    return g1.numpy(), g2.numpy()


def test_hessian_vector_product_matches_finite_differences_of_the_gradient() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 3))
    w1_0, w2_0 = rng.standard_normal((3, 4)) * 0.7, rng.standard_normal((4, 2)) * 0.7
    v1, v2 = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))

    w1, w2 = _leaf(w1_0), _leaf(w2_0)
    g1, g2 = dualflow.grad(_mlp_loss(w1, w2, x), [w1, w2], create_graph=True)
    gv = (g1 * v1).sum() + (g2 * v2).sum()
    hv1, hv2 = dualflow.grad(gv, [w1, w2])
    assert w1.grad is None and w2.grad is None

    eps = 1e-5
    p1, p2 = _gradient(w1_0 + eps * v1, w2_0 + eps * v2, x)
    m1, m2 = _gradient(w1_0 - eps * v1, w2_0 - eps * v2, x)
    np.testing.assert_allclose(hv1.numpy(), (p1 - m1) / (2 * eps), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(hv2.numpy(), (p2 - m2) / (2 * eps), rtol=1e-6, atol=1e-8)


def test_gradient_penalty_backward_reaches_parameters() -> None:
    rng = np.random.default_rng(1)
    w = _leaf(rng.standard_normal((3, 2)))
    x = _leaf(rng.standard_normal((4, 3)))
    loss = ops.tanh(ops.matmul(x, w)).sum()
    (gx,) = dualflow.grad(loss, x, create_graph=True)
    assert w.grad is None
    (gx * gx).sum().backward()

    # d/dw sum((1 - tanh(xw)^2) w^T)^2, by central differences on w
    def penalty(wv: np.ndarray) -> float:
        t = 1 - np.tanh(x.numpy() @ wv) ** 2
        return float(((t @ wv.T) ** 2).sum())

    eps, numeric = 1e-6, np.zeros((3, 2))
    for i in np.ndindex(3, 2):
        d = np.zeros((3, 2))
        d[i] = eps
        numeric[i] = (penalty(w.numpy() + d) - penalty(w.numpy() - d)) / (2 * eps)
    np.testing.assert_allclose(w.grad.numpy(), numeric, rtol=1e-6, atol=1e-8)


def test_gradient_penalty_of_a_relu_layer_gives_its_bias_zeros_as_pytorch() -> None:
    # PyTorch (2.13, this network): grad of sum(g**2) w.r.t. [W1, b1, W2, b2] with
    # allow_unused=True is [tensor, zeros, tensor, None]: relu's backward keeps what feeds its
    # output connected (derivative zero), while b2 never reaches g at all
    rng = np.random.default_rng(0)
    x, w1, b1, w2, b2 = (_leaf(rng.normal(size=s)) for s in ((4, 3), (3, 5), (5,), (5, 2), (2,)))
    out = (ops.relu(x @ w1 + b1) @ w2 + b2).sum()
    (g,) = dualflow.grad(out, x, create_graph=True)
    got = dualflow.grad((g**2).sum(), [w1, b1, w2, b2], allow_unused=True)
    assert got[3] is None and all(t is not None for t in got[:3])
    np.testing.assert_array_equal(got[1].numpy(), np.zeros(5))
    assert np.abs(got[0].numpy()).sum() > 0 and np.abs(got[2].numpy()).sum() > 0
