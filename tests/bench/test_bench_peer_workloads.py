"""The workloads with the peers' exact definitions: shapes, formulas against numpy, and compiled
steps equal to eager ones (narrow sizes through the builders' parameters, so the test is fast)."""

from __future__ import annotations

import numpy as np
import pytest

from dualflow.bench.elementwise_workloads import build_poly_chain
from dualflow.bench.modes import final_state, max_difference, prepare
from dualflow.bench.vision_workloads import build_small_cnn
from dualflow.bench.workloads import (
    WORKLOADS,
    build_gradient_penalty_mlp,
    build_tiny_ops,
    build_tiny_ops_forward,
)


def _eager_and_compiled(build, steps: int = 3, **kwargs) -> list[list[np.ndarray]]:
    states = []
    for mode in ("eager", "compiled"):
        built = build(np.random.default_rng(0), **kwargs)
        step = prepare(mode, built["step"])
        for _ in range(steps):  # trace, then run the plan
            out = step()
        states.append(final_state(built, out))
    return states


@pytest.mark.parametrize(
    ("build", "kwargs", "arrays"),
    [
        (build_small_cnn, {"batch": 2, "size": 8, "width": 4}, 8 + 1),  # params, loss
        (build_poly_chain, {"size": 1000}, 1),
        (build_tiny_ops, {}, 2 + 2),  # x, w, their grads
        # params, weight grads, the zero grads of the two biases feeding a ReLU (the last is None)
        (build_gradient_penalty_mlp, {"batch": 3, "hidden": 16}, 6 + 5),
    ],
)
def test_compiled_equals_eager(build, kwargs, arrays: int) -> None:
    eager, compiled = _eager_and_compiled(build, **kwargs)
    assert len(eager) == len(compiled) == arrays
    assert max_difference(eager, compiled) < 1e-5


def test_small_cnn_has_the_issue_shapes() -> None:
    built = build_small_cnn(np.random.default_rng(0))
    shapes = [tuple(p.shape) for p in built["params"]]
    assert shapes == [(32, 3, 3, 3), (32,), (64, 32, 3, 3), (64,), (64, 64, 3, 3), (64,)] + [
        (10, 64),
        (10,),
    ]
    assert WORKLOADS["small-cnn"].build is build_small_cnn


def test_small_cnn_step_is_plain_sgd_at_lr_0_01() -> None:
    built = build_small_cnn(np.random.default_rng(0), batch=2, size=4, width=2)
    before = [p.numpy().copy() for p in built["params"]]
    built["step"]()
    grads = [p.grad.numpy() for p in built["params"]]
    after = [p.numpy() for p in built["params"]]
    for b, g, a in zip(before, grads, after):
        np.testing.assert_allclose(a, b - 0.01 * g, rtol=1e-6, atol=1e-7)


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-v))


def test_tiny_ops_is_the_peers_chain() -> None:
    built = build_tiny_ops_forward(np.random.default_rng(0))
    rng = np.random.default_rng(0)  # the builder draws x, then w
    x, w = (rng.normal(size=(16, 16)).astype(np.float64) for _ in range(2))
    h = x.astype(np.float32).astype(np.float64)
    for _ in range(10):
        h = _sigmoid(np.tanh(h * 0.9 + 0.1) * w.astype(np.float32))
    assert abs(float(built["step"]().numpy()) - h.sum()) < 1e-3


def test_poly_chain_is_the_peers_formula() -> None:
    built = build_poly_chain(np.random.default_rng(0), size=64)
    x = np.random.default_rng(0).standard_normal(64, dtype=np.float32)
    np.testing.assert_allclose(built["step"]().numpy(), (x * 0.5 + 1) * (x - 2) - x * x, 1e-6)


def _input_grad(xs: np.ndarray, weights: list[np.ndarray]) -> np.ndarray:
    # d sum(f(x)) / dx through linear-ReLU-linear-ReLU-linear, in float64
    w1, b1, w2, b2, w3, _ = weights
    h1 = xs @ w1.T + b1
    h2 = np.maximum(h1, 0) @ w2.T + b2
    d2 = (np.ones((len(xs), 10)) @ w3) * (h2 > 0)
    return ((d2 @ w2) * (h1 > 0)) @ w1


def test_gradient_penalty_mlp_matches_its_formula() -> None:
    built = build_gradient_penalty_mlp(np.random.default_rng(0), batch=2, hidden=5)
    weights = [p.numpy().astype(np.float64) for p in built["params"]]
    xs = built["inputs"][0].numpy().astype(np.float64)
    grads = built["step"]()
    # biases: zero second order; those feeding a ReLU stay connected (zeros, as PyTorch gives)
    assert grads[5] is None and not grads[1].numpy().any() and not grads[3].numpy().any()
    for k in (0, 2, 4):  # d penalty / d W by central differences, one element each
        bumped = [w.copy() for w in weights]
        bumped[k][1, 2] += 1e-6
        lowered = [w.copy() for w in weights]
        lowered[k][1, 2] -= 1e-6
        up, down = (np.sum(_input_grad(xs, ws) ** 2) for ws in (bumped, lowered))
        numeric = (up - down) / 2e-6
        assert abs(float(grads[k].numpy()[1, 2]) - numeric) <= 1e-3 * max(1.0, abs(numeric))
