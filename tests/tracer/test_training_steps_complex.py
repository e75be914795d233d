"""A training step with rotary position embeddings written as LLaMA writes them (``polar``,
``view_as_complex``, complex multiply, ``view_as_real``) compiled vs eager: losses, parameters
and optimizer state after five steps equal the eager run's, and every compiled call is a plan.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import dualflow
from dualflow import optim
from dualflow.nn import Parameter
from tests.tracer.test_training_steps import DTYPES, STEPS, _batches, _optimizer_state, run_both


def _rope_net(dtype: Any) -> tuple[Callable, Callable]:
    rng = np.random.default_rng(3)
    params = [Parameter((rng.normal(size=s) * 0.5).astype(dtype)) for s in [(4, 8), (8, 3)]]
    opt = optim.Adam(params, lr=0.01)
    w_in, w_out = params
    angles = dualflow.tensor(np.outer(np.arange(6), [1.0, 0.1, 0.01, 0.001]).astype(dtype))
    freqs = dualflow.polar(dualflow.ones_like(angles), angles)  # (6, 4) complex

    def step(x: Any, t: Any) -> Any:
        opt.zero_grad()
        h = x @ w_in  # (6, 8): 4 rotated pairs per row
        rotated = dualflow.view_as_complex(h.reshape(6, 4, 2)) * freqs
        mixed = dualflow.view_as_real(rotated).flatten(1) + rotated.abs().sum(1, keepdim=True)
        loss = dualflow.nn.functional.cross_entropy(mixed @ w_out, t)
        loss.backward()
        opt.step()
        return loss.detach()

    return step, lambda: [p.raw_array.copy() for p in params] + _optimizer_state(opt)


@DTYPES
def test_rotary_embedding_step(dtype: Any) -> None:
    batches = _batches(dtype, (6, 4), 3)
    fn = run_both(lambda: _rope_net(dtype), batches, dtype)
    assert fn.stats().plan_runs >= STEPS - 2, fn.stats()
