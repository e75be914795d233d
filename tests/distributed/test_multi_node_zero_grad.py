"""``MultiNodeOptimizer.zero_grad(set_to_none=)`` (PyTorch's signature) on loopback ranks: zeros
instead of None, the same averaged training either way, eagerly and compiled."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import optim
from dualflow.distributed import create_multi_node_optimizer, run_loopback
from tests.distributed.helpers import batches, loss_of, make_params

PER_RANK = 4


def _train(comm, data: list, set_to_none: bool, compile: bool) -> tuple[list, list]:
    params = make_params()
    opt = create_multi_node_optimizer(optim.SGD(params, lr=0.5), comm)

    def step(x, t):
        opt.zero_grad(set_to_none=set_to_none)
        loss = loss_of(params, x, t)
        loss.backward()
        opt.step()
        return loss.detach()

    fn = dualflow.compile(step, fallback="error") if compile else step
    lo, hi = comm.rank * PER_RANK, (comm.rank + 1) * PER_RANK
    for x, t in data:
        fn(dualflow.tensor(x[lo:hi]), dualflow.tensor(t[lo:hi]))
    opt.zero_grad(set_to_none=set_to_none)
    grads = [None if p.grad is None else p.grad.numpy() for p in params]
    if compile:
        assert fn.stats().plan_runs > 0
    return [p.numpy() for p in params], grads


@pytest.mark.parametrize("compile", [False, True])
def test_set_to_none_false_leaves_zeros_and_trains_the_same(compile: bool) -> None:
    data = batches(4, PER_RANK, 2)
    to_none = run_loopback(lambda c: _train(c, data, True, compile), 2)
    to_zero = run_loopback(lambda c: _train(c, data, False, compile), 2)
    for (params_none, grads_none), (params_zero, grads_zero) in zip(to_none, to_zero):
        assert all(g is None for g in grads_none)
        assert all(g is not None and not g.any() for g in grads_zero)
        for a, b in zip(params_none, params_zero):
            np.testing.assert_array_equal(a, b)  # adding to zeros is adding to nothing
    eager = run_loopback(lambda c: _train(c, data, False, False), 2)
    for (got, _), (want, _) in zip(to_zero, eager):
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)  # compiled == eager
