"""``nn.utils``: clip_grad_norm_ (PyTorch's return value and scale, error_if_nonfinite),
clip_grad_value_, parameters_to_vector / vector_to_parameters, and compiled == eager."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import nn
from dualflow.nn.utils import (
    clip_grad_norm_,
    clip_grad_value_,
    parameters_to_vector,
    vector_to_parameters,
)


def with_grads(*grads) -> list[nn.Parameter]:
    params = []
    for g in grads:
        p = nn.Parameter(np.zeros(np.shape(g), np.float32))
        p.grad = dualflow.tensor(np.asarray(g, np.float32))
        params.append(p)
    return params


def test_clip_grad_norm_returns_the_total_norm_and_scales() -> None:
    params = with_grads([3.0], [4.0])
    total = clip_grad_norm_(params, 1.0)
    assert total.item() == pytest.approx(5.0)
    np.testing.assert_allclose([p.grad.item() for p in params], [0.6, 0.8], rtol=1e-5)
    small = with_grads([0.1])
    clip_grad_norm_(small, 1.0)
    assert small[0].grad.item() == pytest.approx(0.1)  # scale min(1, ...): unchanged
    with pytest.raises(RuntimeError, match="non-finite"):
        clip_grad_norm_(with_grads([np.inf]), 1.0, error_if_nonfinite=True)
    with pytest.warns(UserWarning, match="empty generator"):
        clip_grad_norm_((p for p in []), 1.0)


def test_clip_grad_value_clamps_and_returns_none() -> None:
    params = with_grads([-3.0, 0.25, 2.0])
    assert clip_grad_value_(params, 1.0) is None
    assert params[0].grad.tolist() == [-1.0, 0.25, 1.0]


def test_parameter_vector_round_trip() -> None:
    a, b = nn.Parameter(np.ones((2, 2), np.float32)), nn.Parameter(np.zeros(3, np.float32))
    vec = parameters_to_vector([a, b])
    assert vec.shape == (7,)
    vector_to_parameters(np.arange(7.0, dtype=np.float32), [a, b])
    assert a.tolist() == [[0.0, 1.0], [2.0, 3.0]] and b.tolist() == [4.0, 5.0, 6.0]


def test_clipping_in_a_compiled_step_equals_eager() -> None:
    def run(compiled: bool) -> list[float]:
        dualflow.random.seed(0)
        model = nn.Linear(3, 2)
        opt = dualflow.optim.SGD(model.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = dualflow.ops.sum(model(x) ** 2)
            loss.backward()
            norm = clip_grad_norm_(model.parameters(), 0.5)
            clip_grad_value_(model.parameters(), 0.05)
            opt.step()
            return norm

        fn = dualflow.compile(step) if compiled else step
        x = dualflow.tensor(np.ones((4, 3), np.float32) * 3)
        return [fn(x).item() for _ in range(3)] + model.weight.numpy().ravel().tolist()

    np.testing.assert_allclose(run(True), run(False), rtol=1e-5)
