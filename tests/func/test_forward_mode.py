"""Forward mode composes: jvp of jvp, forward over reverse, reverse over forward, nested levels
keep their tangents apart; tangents follow dtype casts, detach and in-place writes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import func


def _t(*shape: int, seed: int = 0) -> dualflow.Tensor:
    return dualflow.tensor(np.random.default_rng(seed).normal(size=shape))


M = _t(3, 3, seed=9)


def _f(x: Any) -> Any:
    return ((x.sin() @ M) * x).tanh().sum()


def test_forward_over_reverse_and_jvp_of_jvp_give_the_hessian() -> None:
    x, v, w = _t(3, seed=1), _t(3, seed=2), _t(3, seed=3)
    hess = func.jacrev(func.jacrev(_f))(x).numpy()
    _, hv = func.jvp(func.grad(_f), (x,), (v,))  # forward over reverse
    np.testing.assert_allclose(hv.numpy(), hess @ v.numpy(), rtol=1e-10)

    def directional(y: Any) -> Any:
        return func.jvp(_f, (y,), (v,))[1]

    _, second = func.jvp(directional, (x,), (w,))  # jvp of jvp: w^T H v
    np.testing.assert_allclose(second.item(), w.numpy() @ hess @ v.numpy(), rtol=1e-10)
    np.testing.assert_allclose(func.jacfwd(func.jacfwd(_f))(x).numpy(), hess, rtol=1e-10)
    np.testing.assert_allclose(func.grad(directional)(x).numpy(), hess @ v.numpy(), rtol=1e-10)


def test_nested_levels_keep_their_tangents_apart() -> None:
    """d/dx [x * (d/dy x*y at y=x along 1)] = d/dx x^2 = 2x: the inner level's tangent must
    not leak into the outer one's (perturbation confusion)."""
    x = dualflow.tensor(3.0, dtype=dualflow.float64)
    one = dualflow.tensor(1.0, dtype=dualflow.float64)

    def f(x: Any) -> Any:
        return x * func.jvp(lambda y: x * y, (x,), (one,))[1]

    assert func.jvp(f, (x,), (one,))[1].item() == 6.0


def test_tangents_follow_casts_and_unused_outputs_get_zeros() -> None:
    x = _t(2, seed=4)
    _, (cast_t, const_t) = func.jvp(
        lambda x: ((x * x).to(dualflow.float32), x.shape[0] * 1.0 + 0 * x.detach()), (x,), (x,)
    )
    assert cast_t.dtype == np.float32
    np.testing.assert_allclose(cast_t.numpy(), (2 * x * x).numpy().astype(np.float32))
    np.testing.assert_array_equal(const_t.numpy(), np.zeros(2))
    assert not cast_t.requires_grad


def test_compiled_forward_compositions_equal_eager() -> None:
    v = _t(3, seed=2)

    def both(x: Any) -> tuple:
        return func.jvp(func.grad(_f), (x,), (v,))[1], func.hessian(_f)(x)

    compiled = dualflow.compile(both, fallback="error")
    for seed in (1, 5):
        x = _t(3, seed=seed)
        for got, want in zip(compiled(x), both(x)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-14)
    assert compiled.stats().traces == 1


def test_detach_and_in_place_writes_as_torch_func() -> None:
    """torch.func's answers: detach drops the tangent; an in-place write into an intermediate
    carries the written value's tangent; a write into memory another tracked tensor views is
    refused before it happens."""
    x = dualflow.tensor([1.0, 2.0], dtype=dualflow.float64)
    t = dualflow.ones(2, dtype=dualflow.float64)
    assert func.jvp(lambda x: x.detach() * x, (x,), (t,))[1].tolist() == [1.0, 2.0]

    def scaled(x: Any) -> Any:
        y = x * 1.0
        y.mul_(3.0)
        return y

    assert func.jvp(scaled, (x,), (t,))[1].tolist() == [3.0, 3.0]

    def through_view(x: Any) -> Any:
        y = x * 1.0
        view = y[0:1]
        y.fill_(7.0)
        return view

    with pytest.raises(RuntimeError, match="shares"):
        func.jvp(through_view, (x,), (t,))
    state = dualflow.zeros(2, dtype=dualflow.float64)

    def writes(x: Any) -> Any:
        dualflow.ops.assign(state, x * 2)
        return x + state  # the written state carries the value's tangent: 3 t

    assert func.jvp(writes, (x,), (t,))[1].tolist() == [3.0, 3.0]
