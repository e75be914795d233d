"""Issue 36, item 5: a rank whose compiled call raised after its all-reduces (caught by the user)
must not drift apart from the others. Every rank raises in that same call (the call's closing
vote) and undoes it, and plan runs count optimizer steps like eager ones, so the counts the votes
compare stay true (the drift used to go unnoticed: the ranks then trained on with different
parameters).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import optim
from dualflow.distributed import create_multi_node_optimizer, run_loopback
from tests.distributed.helpers import NAMES, loss_of, make_params

CALLS = 5


def _late_failures(comm: Any, fail_at: int, compiled: bool = True) -> tuple:
    """``CALLS`` steps; rank 1's call ``fail_at`` raises after its update. What each call did,
    the step counts after each, and the final first parameter."""
    params = make_params()
    opt = create_multi_node_optimizer(
        optim.SGD(params, lr=0.1), comm, named_params=zip(NAMES, params)
    )

    def step(x: Any, t: Any, fail: bool = False) -> Any:
        opt.zero_grad()
        loss = loss_of(params, x, t)
        loss.backward()
        opt.step()
        if fail:  # late: after the all-reduces and the update
            raise ValueError("a late failure")
        return loss.detach()

    fn = dualflow.compile(step) if compiled else step
    rng, outcomes, counts = np.random.default_rng(comm.rank), [], []
    for i in range(CALLS):
        x = dualflow.tensor(rng.normal(size=(8, 4)).astype(np.float32))
        try:
            fn(x, dualflow.tensor(rng.integers(0, 3, 8)), fail=comm.rank == 1 and i == fail_at)
            outcomes.append("ok")
        except Exception as exc:  # the user catches it and goes on
            outcomes.append(f"{type(exc).__name__}: {exc}")
        counts.append(comm.optimizer_steps)
    return outcomes, counts, params[0].numpy()


@pytest.mark.parametrize("fail_at", [0, 2], ids=["first-call", "third-call"])
def test_a_late_failure_on_one_rank_fails_every_rank_in_that_call(fail_at: int) -> None:
    runs = run_loopback(lambda c: _late_failures(c, fail_at), 2)
    (outcomes0, counts0, w0), (outcomes1, counts1, w1) = runs
    assert outcomes0[:fail_at] == outcomes1[:fail_at] == ["ok"] * fail_at
    assert outcomes1[fail_at] == "ValueError: a late failure"
    assert outcomes0[fail_at].startswith("CommunicatorError: rank 1 failed in a compiled call")
    assert "ValueError: a late failure; this call cannot complete" in outcomes0[fail_at]
    if fail_at == 0:
        # the first call does not know yet that it issues collectives: it votes when it has
        # returned, too late to undo rank 0's run. The ranks differ, and no later call may
        # commit silently on either rank
        for later in outcomes0[1:] + outcomes1[1:]:
            assert later.startswith("CollectiveMismatch: ranks disagree"), later
        assert "after different numbers of optimizer steps" in outcomes0[-1]
        assert not np.array_equal(w0, w1)  # what the errors protect the user from
        return
    # later, every rank undoes that call (its run, traced or eager, rolls back when the closing
    # vote fails), so the ranks stay in step: later calls succeed with the same parameters
    assert outcomes0[fail_at + 1 :] == outcomes1[fail_at + 1 :] == ["ok"] * (CALLS - fail_at - 1)
    assert counts0 == counts1 and counts0[-1] == CALLS - 1
    np.testing.assert_array_equal(w0, w1)


def test_plan_runs_count_optimizer_steps_like_eager() -> None:
    for compiled in (False, True):
        results = run_loopback(lambda c, compiled=compiled: _late_failures(c, -1, compiled), 2)
        for outcomes, counts, _ in results:
            assert outcomes == ["ok"] * CALLS
            assert counts == list(range(1, CALLS + 1))
        np.testing.assert_array_equal(results[0][2], results[1][2])


def test_a_failed_trace_rolls_its_step_count_back() -> None:
    results = run_loopback(lambda c: _late_failures(c, 0), 2)
    assert results[0][1][0] == 1  # rank 0's first call committed its step...
    assert results[1][1][0] == 0  # ...rank 1's traced call raised: rolled back with its update
