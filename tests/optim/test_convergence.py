"""Every optimizer drives the least-squares loss to (nearly) zero, in float64 and float32."""

from __future__ import annotations

import numpy as np
import pytest

from dualflow.nn import Parameter
from dualflow.optim import SGD, Adam, AdamW, RMSprop
from dualflow.optim.lr_scheduler import CosineAnnealingLR
from tests.optim.problems import X0, X_STAR, backward, loss_np

# (optimizer factory, steps, anneal the lr with a cosine schedule?). RMSprop's normalized step
# keeps a constant-lr run oscillating near the minimum, so its runs anneal the lr.
CASES = {
    "sgd": (lambda ps: SGD(ps, lr=0.05), 300, False),
    "sgd-momentum": (lambda ps: SGD(ps, lr=0.05, momentum=0.9), 200, False),
    "sgd-nesterov": (lambda ps: SGD(ps, lr=0.05, momentum=0.9, nesterov=True), 200, False),
    "adam": (lambda ps: Adam(ps, lr=0.05), 400, False),
    "adam-amsgrad": (lambda ps: Adam(ps, lr=0.05, amsgrad=True), 400, False),
    "adamw": (lambda ps: AdamW(ps, lr=0.05, weight_decay=0.0), 400, False),
    "rmsprop": (lambda ps: RMSprop(ps, lr=0.02), 300, True),
    "rmsprop-centered-momentum": (
        lambda ps: RMSprop(ps, lr=0.01, momentum=0.5, centered=True),
        300,
        True,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_converges_on_least_squares(name: str, dtype: str) -> None:
    make, steps, anneal = CASES[name]
    p = Parameter(X0.astype(dtype))
    opt = make([p])
    scheduler = CosineAnnealingLR(opt, T_max=steps) if anneal else None
    first = backward(p)
    for _ in range(steps):
        backward(p)
        opt.step()
        if scheduler is not None:
            scheduler.step()
    assert p.dtype == np.dtype(dtype)
    assert first > 1.0
    assert loss_np(p.numpy().astype("float64")) < 1e-8
    assert np.abs(p.numpy() - X_STAR).max() < 1e-3
