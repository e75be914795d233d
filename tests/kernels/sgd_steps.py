"""A small SGD training step on a model, run eagerly or compiled, for the kernel tests that check
a compiled step against eager mode bit for bit (losses and every parameter after a few calls)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import dualflow
from dualflow import ops


def losses_and_params(
    make_model: Callable[[], Any], x_shape: tuple, passes: str | None = None, calls: int = 3
) -> tuple[list[float], list[np.ndarray]]:
    """The losses of ``calls`` SGD steps (lr 0.1, loss ``sum(model(x) ** 2)``) and the parameters
    after them; eager when ``passes`` is None, else compiled with those passes (and checked to
    have run as a plan, never falling back)."""
    dualflow.random.seed(0)
    model = make_model()
    x = dualflow.tensor(np.random.default_rng(3).standard_normal(x_shape, np.float32))
    opt = dualflow.optim.SGD(model.parameters(), lr=0.1)

    def step():
        opt.zero_grad()
        loss = ops.sum(model(x) ** 2)
        loss.backward()
        opt.step()
        return loss

    fn = step if passes is None else dualflow.compile(step, passes=passes)
    losses = [fn().item() for _ in range(calls)]
    if passes is not None:  # it really ran as a plan
        assert fn.stats().plan_runs >= 1 and fn.stats().eager_fallbacks == 0
    return losses, [p.numpy().copy() for p in model.parameters()]


def assert_compiled_equals_eager(
    make_model: Callable[[], Any], x_shape: tuple, passes: Sequence[str]
) -> None:
    """The compiled step at each of ``passes`` gives eager's losses and parameters, bit for bit."""
    eager = losses_and_params(make_model, x_shape)
    for name in passes:
        compiled = losses_and_params(make_model, x_shape, name)
        assert eager[0] == compiled[0], name
        for a, b in zip(eager[1], compiled[1], strict=True):
            np.testing.assert_array_equal(a, b)
