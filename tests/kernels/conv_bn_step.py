"""What the batch-norm kernels' tests share: the (N, C, ...) shapes and dtypes they draw, and a
conv/BN/ReLU training step compiled and eager."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import dualflow
from dualflow import nn, ops


def _build(dtype: str) -> tuple:
    dualflow.random.seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
    model = model.to(dtype)
    opt = dualflow.optim.SGD(model.parameters(), lr=0.1)
    x = dualflow.tensor(np.random.default_rng(1).standard_normal((4, 3, 8, 8)), dtype=dtype)

    def step() -> object:
        opt.zero_grad()
        loss = ops.mean(model(x) ** 2)
        loss.backward()
        opt.step()
        return loss

    return model, step


def assert_compiled_equals_eager(dtype: str) -> None:
    """Three steps eager and compiled from the same start: the same losses and parameters, bit
    for bit."""
    eager_model, eager_step = _build(dtype)
    compiled_model, compiled_step = _build(dtype)
    compiled_step = dualflow.compile(compiled_step)
    for _ in range(3):
        assert eager_step().item() == compiled_step().item()
    for a, b in zip(eager_model.state_dict().values(), compiled_model.state_dict().values()):
        assert np.array_equal(np.asarray(a), np.asarray(b))


def drawn_inputs(test: Callable[..., None]) -> Callable[..., None]:
    """``test(shape, dtype, seed)`` over drawn (N, C, ...) shapes with two or more values per
    channel (N >= 2), float32 or float64: 40 examples, no deadline (the first compiles)."""
    drawn = given(
        shape=st.tuples(
            st.integers(2, 10), st.lists(st.integers(1, 9), min_size=2, max_size=4)
        ).map(lambda drawn: (drawn[0], *drawn[1])),
        dtype=st.sampled_from([np.float32, np.float64]),
        seed=st.integers(0, 2**16),
    )(test)
    return settings(max_examples=40, deadline=None)(drawn)
