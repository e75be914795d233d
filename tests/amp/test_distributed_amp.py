"""Mixed precision with data parallelism on loopback ranks: autocast + GradScaler + the multi-node
optimizer reducing gradients in float16. An inf on one rank reaches every rank through the
average, so every rank skips the same step and backs off the same scale: the ranks stay equal,
eagerly and compiled. (Compiled, ``step``'s ``bool(found_inf)`` comes after the all-reduce, which
the tracer refuses to guard (a deadlock if ranks disagreed), so the step runs eagerly, with a
warning: the branch-free skip that would compile is not written yet.)"""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import optim
from dualflow.amp import GradScaler, autocast
from dualflow.distributed import create_multi_node_optimizer
from dualflow.distributed.loopback import run_loopback
from tests.distributed.helpers import batches, loss_of, make_params

STEPS, BAD_STEP, PER_RANK = 4, 2, 4


def _rank(comm, compiled: bool) -> tuple:
    params = make_params()
    opt = create_multi_node_optimizer(optim.SGD(params, lr=0.5), comm, grad_dtype="float16")
    scaler = GradScaler(init_scale=2.0**8)

    def step(x, t):
        opt.zero_grad()
        with autocast("cpu", dtype="float16"):
            loss = loss_of(params, x, t)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss.detach()

    fn = dualflow.compile(step) if compiled else step
    lo, hi = comm.rank * PER_RANK, (comm.rank + 1) * PER_RANK
    trail = []
    for k, (x, t) in enumerate(batches(STEPS, PER_RANK, comm.size)):
        x = x[lo:hi].copy()
        if k == BAD_STEP and comm.rank == 1:
            x[0, 0] = np.inf
        before = [p.numpy().copy() for p in params]
        fn(dualflow.tensor(x), dualflow.tensor(t[lo:hi]))
        moved = any(not np.array_equal(b, p.numpy()) for b, p in zip(before, params))
        trail.append((scaler.get_scale(), moved))
    return trail, [p.numpy().copy() for p in params]


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_every_rank_skips_the_overflowing_step_together(compiled: bool) -> None:
    if compiled:
        with pytest.warns(RuntimeWarning, match="bool\\(\\) of a tensor after the all-reduce"):
            results = run_loopback(lambda c: _rank(c, compiled), 2)
    else:
        results = run_loopback(lambda c: _rank(c, compiled), 2)
    (trail0, params0), (trail1, params1) = results
    assert trail0 == trail1
    assert [moved for _, moved in trail0] == [k != BAD_STEP for k in range(STEPS)]
    assert trail0[BAD_STEP][0] == trail0[BAD_STEP - 1][0] / 2
    for a, b in zip(params0, params1):
        np.testing.assert_array_equal(a, b)
