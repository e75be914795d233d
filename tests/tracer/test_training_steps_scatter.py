"""Training steps using the scatter/index additions (``index_add``, ``scatter_reduce``,
``scatter_add``, ``repeat_interleave``) compiled vs eager: a small message-passing network whose
losses, parameters and optimizer state after five steps equal the eager run's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import ops, optim
from dualflow.nn import Parameter
from tests.tracer.test_training_steps import DTYPES, STEPS, _batches, _optimizer_state, run_both

SRC = np.array([0, 1, 2, 3, 4, 5, 0, 2, 4])
DST = np.array([1, 2, 3, 4, 5, 0, 3, 3, 0])


def _graph_net(dtype: Any, reduce: str) -> tuple[Callable, Callable]:
    rng = np.random.default_rng(1)
    shapes = [(4, 4), (3, 8), (4,)]
    params = [Parameter((rng.normal(size=s) * 0.5).astype(dtype)) for s in shapes]
    opt = optim.Adam(params, lr=0.01)
    w1, w2, b = params
    src, dst = dualflow.tensor(SRC), dualflow.tensor(DST)

    def step(x: Any, t: Any) -> Any:
        opt.zero_grad()
        h = x @ w1
        messages = h.index_select(0, src)
        summed = ops.zeros_like(h).index_add(0, dst, messages, alpha=0.5)
        spread = dst.view(-1, 1).expand(-1, 4)
        reduced = h.scatter_reduce(0, spread, messages, reduce, include_self=False)
        added = h.scatter_add(0, spread, messages * 0.25)
        features = dualflow.cat([summed + reduced, added * b], dim=1)  # (6, 8)
        wide = b.repeat_interleave(2) + features.repeat_interleave(1, dim=0)
        loss = dualflow.nn.functional.cross_entropy(wide @ w2.t(), t)
        loss.backward()
        opt.step()
        return loss.detach()

    return step, lambda: [p.raw_array.copy() for p in params] + _optimizer_state(opt)


@DTYPES
@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "prod"])
def test_message_passing_step(reduce: str, dtype: Any) -> None:
    batches = _batches(dtype, (6, 4), 3)
    fn = run_both(lambda: _graph_net(dtype, reduce), batches, dtype)
    assert fn.stats().plan_runs >= STEPS - 2, fn.stats()
    assert fn.stats().eager_fallbacks == 0


def _sparse_net(dtype: Any) -> tuple[Callable, Callable]:
    rng = np.random.default_rng(2)
    shapes = [(4, 3), (SRC.size,)]
    params = [Parameter((rng.normal(size=s) * 0.5).astype(dtype)) for s in shapes]
    opt = optim.SGD(params, lr=0.1, momentum=0.9)
    w, edge_weights = params
    edges = dualflow.tensor(np.stack([DST, SRC]))

    def step(x: Any, t: Any) -> Any:
        opt.zero_grad()
        adjacency = dualflow.sparse_coo_tensor(edges, edge_weights, (6, 6))
        logits = dualflow.sparse.mm(adjacency, x @ w) + adjacency.to_dense().sum(1, keepdim=True)
        loss = dualflow.nn.functional.cross_entropy(logits, t)
        loss.backward()  # reaches both the dense operand's weights and the sparse values
        opt.step()
        return loss.detach()

    return step, lambda: [p.raw_array.copy() for p in params] + _optimizer_state(opt)


@DTYPES
def test_sparse_adjacency_step(dtype: Any) -> None:
    batches = _batches(dtype, (6, 4), 3)
    fn = run_both(lambda: _sparse_net(dtype), batches, dtype)
    assert fn.stats().plan_runs >= STEPS - 2, fn.stats()
