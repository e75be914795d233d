"""grad/vjp/jacrev/jvp/jacfwd/hessian/hvp: argnums and has_aux, nesting (the inner level
treats closed-over tensors as constants), detached results, composition with the user's own
autograd, Jacobians of many ops by both modes against central differences, eager and compiled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import func, nn
from dualflow.nn import functional as nnf


def _t(*shape: int, seed: int = 0) -> dualflow.Tensor:
    return dualflow.tensor(np.random.default_rng(seed).normal(size=shape))


def _numeric_jacobian(f: Callable, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    out = f(dualflow.tensor(x)).numpy()
    jac = np.zeros(out.shape + x.shape)
    for idx in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[idx] += eps
        minus[idx] -= eps
        diff = f(dualflow.tensor(plus)).numpy() - f(dualflow.tensor(minus)).numpy()
        jac[(...,) + idx] = diff / (2 * eps)
    return jac


W = _t(3, 4, seed=7)
KERNEL = _t(2, 1, 3, 3, seed=8)
FUNCTIONS: dict[str, tuple[Callable, tuple[int, ...]]] = {
    "elementwise": (lambda x: (x.sin() * x.exp()).tanh() / (1 + x * x), (2, 3)),
    "matmul_softmax": (lambda x: nnf.softmax(x @ W, dim=-1), (2, 3)),
    "log_softmax_sum": (lambda x: nnf.log_softmax(x, dim=0).sum(1), (3, 2)),
    "shape_family": (lambda x: x.T.reshape(-1).unsqueeze(0).expand(2, 6) * 2, (2, 3)),
    "mean_var": (lambda x: x.mean(0) * x.var(1, keepdim=True), (3, 3)),
    "conv_pool": (lambda x: nnf.max_pool2d(nnf.conv2d(x, KERNEL, padding=1), 2), (1, 1, 4, 4)),
    "layer_norm": (lambda x: nnf.layer_norm(x, (3,)), (2, 3)),
    "gelu_sigmoid": (lambda x: nnf.gelu(x) * x.sigmoid(), (4,)),
}


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_jacobians_agree_with_finite_differences(name: str) -> None:
    f, shape = FUNCTIONS[name]
    x = _t(*shape, seed=3)
    numeric = _numeric_jacobian(f, x.numpy())
    for jac in (func.jacrev(f)(x), func.jacfwd(f)(x)):
        assert jac.shape == numeric.shape
        assert not jac.requires_grad
        np.testing.assert_allclose(jac.numpy(), numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", ["elementwise", "matmul_softmax", "conv_pool"])
def test_compiled_jacobians_equal_eager(name: str) -> None:
    f, shape = FUNCTIONS[name]
    both = dualflow.compile(lambda x: (func.jacrev(f)(x), func.jacfwd(f)(x)), fallback="error")
    for seed in (1, 2):
        x = _t(*shape, seed=seed)
        got, want = both(x), (func.jacrev(f)(x), func.jacfwd(f)(x))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12, atol=1e-14)


def test_argnums_and_has_aux() -> None:
    x, y = _t(3, seed=1), _t(3, seed=2)

    def f(a: Any, b: Any) -> tuple:
        return (a * b * b).sum(), {"out": a + b}

    (ga, gb), aux = func.grad(f, argnums=(0, -1), has_aux=True)(x, y)
    np.testing.assert_allclose(ga.numpy(), (y * y).numpy())
    np.testing.assert_allclose(gb.numpy(), (2 * x * y).numpy())
    assert not aux["out"].requires_grad
    g, (value, _) = func.grad_and_value(f, argnums=1, has_aux=True)(x, y)
    np.testing.assert_allclose(value.item(), (x * y * y).sum().item())
    np.testing.assert_allclose(g.numpy(), (2 * x * y).numpy())
    with pytest.raises(ValueError, match="out of range"):
        func.grad(f, argnums=2)(x, y)
    with pytest.raises(ValueError, match="one-element"):
        func.grad(lambda a: a * 2)(x)
    with pytest.raises(TypeError, match="floating-point"):
        func.grad(lambda a: a.sum())(dualflow.tensor([1, 2]))


def test_inner_level_treats_closed_over_inputs_as_constants() -> None:
    """torch.func's answer: d/dx [x * (d/dy x*y)] = d/dx x^2 = 2x (not 3x, nor x)."""

    def f(x: Any) -> Any:
        return x * func.grad(lambda y: x * y)(x)

    assert func.grad(f)(dualflow.tensor(3.0, dtype="float64")).item() == 6.0
    assert func.grad(func.grad(lambda x: x**4))(dualflow.tensor(2.0)).item() == 48.0


def test_results_stay_differentiable_for_closed_over_parameters() -> None:
    """A meta-learning step: the outer loss reaches w through the inner gradient."""
    w = dualflow.tensor(np.array([0.5, -1.0]), requires_grad=True)
    x = _t(2, seed=4)
    inner = func.grad(lambda x: (w * x * x).sum())(x)  # 2 w x
    assert inner.requires_grad
    (inner * inner).sum().backward()  # d/dw sum(4 w^2 x^2) = 8 w x^2
    np.testing.assert_allclose(w.grad.numpy(), 8 * w.detach().numpy() * x.numpy() ** 2)


def test_transforms_work_inside_no_grad() -> None:
    x = _t(3, seed=5)
    with dualflow.no_grad():
        g = func.grad(lambda a: (a**2).sum())(x)
    np.testing.assert_allclose(g.numpy(), 2 * x.numpy())


def test_vjp_jvp_and_hvp() -> None:
    x, t = _t(4, seed=1), _t(4, seed=2)

    def f(a: Any) -> Any:
        return (a.sin() * a) @ (_t(4, 4, seed=9) + a.reshape(4, 1))

    out, vjp_fn = func.vjp(f, x)
    jac = func.jacrev(f)(x).numpy()
    np.testing.assert_allclose(out.numpy(), f(x).numpy())
    assert not out.requires_grad
    np.testing.assert_allclose(vjp_fn(t)[0].numpy(), t.numpy() @ jac, rtol=1e-12)
    np.testing.assert_allclose(vjp_fn(2 * t)[0].numpy(), 2 * t.numpy() @ jac, rtol=1e-12)
    _, tangent = func.jvp(f, (x,), (t,))
    np.testing.assert_allclose(tangent.numpy(), jac @ t.numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="tangent of shape"):
        func.jvp(f, (x,), (t[:2],))
    with pytest.raises(ValueError, match="cotangent of shape"):
        vjp_fn(t[:2])

    def scalar(a: Any) -> Any:
        return (a.sin() * a * a).sum()

    value, (hv,) = func.hvp(scalar, (x,), (t,))
    hess = func.hessian(scalar)(x).numpy()
    np.testing.assert_allclose(hv.numpy(), hess @ t.numpy(), rtol=1e-10)
    np.testing.assert_allclose(value.item(), scalar(x).item())
    np.testing.assert_allclose(hess, hess.T, rtol=1e-12)


def test_compiled_compositions_equal_eager() -> None:
    def f(a: Any, b: Any) -> Any:
        return ((a @ b).tanh() ** 2).sum()

    def everything(a: Any, b: Any) -> tuple:
        second = func.grad(lambda a: func.grad(f)(a, b).sum())(a)
        hess = func.hessian(f, argnums=1)(a, b)
        jvp_out = func.jvp(lambda b: func.grad(f, argnums=1)(a, b), (b,), (b,))[1]
        return second, hess, jvp_out

    compiled = dualflow.compile(everything, fallback="error")
    for seed in (1, 2, 3):
        a, b = _t(2, 3, seed=seed), _t(3, 2, seed=seed + 10)
        for got, want in zip(compiled(a, b), everything(a, b)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-11, atol=1e-13)
    assert compiled.stats().traces == 1


def test_pytree_arguments_outputs_and_tuple_argnums() -> None:
    """jacrev/jacfwd over a dict of parameters (functional_call's usual form) and tuple
    outputs; hessian over a tuple of argnums nests as torch.func's."""
    model = nn.Linear(3, 2).double()
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = _t(4, 3, seed=6)

    def out(p: dict) -> tuple:
        y = func.functional_call(model, p, (x,))
        return y, (y * y).sum()

    for jac in (func.jacrev(out)(params), func.jacfwd(out)(params)):
        assert isinstance(jac, tuple) and set(jac[0]) == {"weight", "bias"}
        assert jac[0]["weight"].shape == (4, 2, 2, 3) and jac[1]["bias"].shape == (2,)
        np.testing.assert_allclose(jac[0]["bias"].numpy(), np.broadcast_to(np.eye(2), (4, 2, 2)))
        np.testing.assert_allclose(jac[0]["weight"].numpy()[:, 0, 0], x.numpy())

    def g(a: Any, b: Any) -> Any:
        return (a * a * b).sum()

    a, b = _t(2, seed=1), _t(2, seed=2)
    (haa, hab), (hba, hbb) = func.hessian(g, argnums=(0, 1))(a, b)
    np.testing.assert_allclose(haa.numpy(), np.diag(2 * b.numpy()))
    np.testing.assert_allclose(hab.numpy(), np.diag(2 * a.numpy()))
    np.testing.assert_allclose(hba.numpy(), hab.numpy().T)
    np.testing.assert_allclose(hbb.numpy(), np.zeros((2, 2)))
