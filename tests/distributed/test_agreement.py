"""Collective agreement on loopback ranks (threads): mismatched collectives raise on every rank
naming each one's call site, a rank that returned or never arrives fails the others instead of
hanging them, and compiled calls decide plan-or-eager together (compiled equals eager when one
rank retraces).
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import nn, ops, optim
from dualflow.distributed import (
    create_loopback_group,
    create_multi_node_optimizer,
    run_loopback,
)
from dualflow.distributed.agreement import CollectiveMismatch
from dualflow.distributed.loopback import CollectiveTimeout, PeerFailed
from dualflow.distributed.watchdog import default_timeout
from dualflow.errors import CommunicatorError
from tests.distributed.helpers import NAMES, loss_of, make_params


def _errors(body: Any, size: int = 2) -> list[str]:
    """Run ``body(comm)`` on every rank; each rank's CommunicatorError text (or None)."""

    def catching(comm: Any) -> str | None:
        try:
            body(comm)
        except CommunicatorError as exc:
            return str(exc)
        return None

    return run_loopback(catching, size)


def test_different_collectives_raise_on_every_rank_with_both_call_sites() -> None:
    def body(comm: Any) -> None:
        if comm.rank == 0:
            comm.allgather("x")
        else:
            comm.barrier()

    for rank, message in enumerate(_errors(body)):
        assert message.startswith("ranks disagree at collective #1 of the loopback communicator")
        assert re.search(r"rank 0: #1 allgather at test_agreement.py:\d+", message)
        assert re.search(r"rank 1: #1 barrier at test_agreement.py:\d+", message)
        assert message.endswith(f"this is rank {rank})")


def test_sequence_numbers_count_every_collective_of_a_communicator() -> None:
    def body(comm: Any) -> tuple[int, int]:
        comm.barrier()
        comm.allreduce(np.ones(2))
        first = comm.ledger.seq
        comm.agree("done")
        return first, comm.ledger.seq

    assert run_loopback(body, 3) == [(2, 3)] * 3


def test_a_rank_that_returned_fails_the_ranks_still_waiting_for_it() -> None:
    def body(comm: Any) -> None:
        if comm.rank == 0:
            time.sleep(0.2)  # rank 1 has returned by now
            comm.allgather(0)

    with pytest.raises(PeerFailed, match=r"rank\(s\) 1 returned .* rank 0 waits in collective #1"):
        run_loopback(body, 2)


def test_a_collective_that_times_out_names_the_ranks_that_did_not_arrive() -> None:
    comms = create_loopback_group(3, timeout=0.5)
    errors: dict[int, BaseException] = {}

    def rank(comm: Any) -> None:
        try:
            if comm.rank < 2:
                comm.allgather(comm.rank)
        except CommunicatorError as exc:
            errors[comm.rank] = exc

    threads = [threading.Thread(target=rank, args=(c,)) for c in comms]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    timed_out = [e for e in errors.values() if isinstance(e, CollectiveTimeout)]
    assert len(timed_out) == 1 and set(errors) == {0, 1}
    assert re.search(
        r"collective #1 allgather at test_agreement.py:\d+ did not complete within 0.5 s "
        r"\(comm.timeout\); not arrived: rank 2 \(last finished before its first collective\)",
        str(timed_out[0]),
    )


def test_the_timeout_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUALFLOW_COLLECTIVE_TIMEOUT", "12.5")
    assert default_timeout() == 12.5
    assert create_loopback_group(1)[0].timeout == 12.5
    monkeypatch.setenv("DUALFLOW_COLLECTIVE_TIMEOUT", "soon")
    with pytest.raises(
        ValueError, match="DUALFLOW_COLLECTIVE_TIMEOUT='soon' must be a finite number"
    ):
        default_timeout()
    monkeypatch.delenv("DUALFLOW_COLLECTIVE_TIMEOUT")
    assert default_timeout() == 300.0


# ----- compiled calls vote plan-or-eager ----------------------------------------------------------
def _model() -> nn.Module:
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
    rng = np.random.default_rng(3)  # not dualflow.random.seed: the ranks are threads here
    with dualflow.no_grad():
        for p in model.params():
            ops.assign(p, dualflow.tensor(rng.normal(size=p.shape).astype(np.float32) * 0.5))
    return model


def _train(comm: Any, compiled: bool, sizes: list[int], fail_at: int = -1) -> tuple:
    """Steps of a BatchNorm MLP; rank 1's batch at step ``i`` has ``sizes[i]`` rows."""
    model = _model()
    opt = create_multi_node_optimizer(optim.SGD(list(model.params()), lr=0.1), comm, model=model)

    def step(x: Any, t: Any, fail: bool = False) -> Any:
        opt.zero_grad()
        loss = ops.softmax_cross_entropy(model(x), t)
        if fail:
            raise ValueError("bad batch")
        loss.backward()
        opt.step()
        return loss.detach()

    fn = dualflow.compile(step) if compiled else step
    rng = np.random.default_rng(comm.rank)
    for i, n in enumerate(sizes):
        n = n if comm.rank == 1 else 8
        x = dualflow.tensor(rng.normal(size=(n, 4)).astype(np.float32))
        fn(x, dualflow.tensor(rng.integers(0, 3, n)), fail=comm.rank == 1 and i == fail_at)
    state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    return state, fn.stats() if compiled else None


def test_one_rank_retracing_runs_every_rank_eagerly_for_that_call() -> None:
    sizes = [8, 8, 8, 8, 5, 8, 8]  # rank 1's fifth batch is short: only rank 1 retraces
    eager = run_loopback(lambda c: _train(c, False, sizes)[0], 2)
    compiled = run_loopback(lambda c: _train(c, True, sizes), 2)
    (state0, stats0), (state1, stats1) = compiled
    assert stats0.eager_fallbacks == 1 and stats1.traces == stats0.traces + 1
    assert stats0.plan_runs > 0
    for (state, _), want in zip(compiled, eager):
        for name, value in want.items():  # BatchNorm's running statistics included
            np.testing.assert_allclose(state[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    for name in ("0.weight", "3.bias"):
        np.testing.assert_array_equal(state0[name], state1[name])


def test_a_rank_failing_inside_a_compiled_call_fails_the_others() -> None:
    def body(comm: Any) -> None:
        try:
            _train(comm, True, [8] * 5, fail_at=3)
        except ValueError:
            assert comm.rank == 1  # rank 1 catches its own error and moves on
            comm.barrier()

    messages = _errors(body)
    assert messages[1] is not None  # rank 1's next collective cannot pair either
    assert re.search(r"rank 1: #\d+ compiled call of .* \(ValueError: bad batch\)", messages[0])


def test_a_function_is_known_to_use_collectives_after_its_first_call() -> None:
    def body(comm: Any) -> bool:
        params = make_params()
        opt = create_multi_node_optimizer(
            optim.SGD(params, lr=0.1), comm, named_params=zip(NAMES, params)
        )

        @dualflow.compile
        def step(x: Any, t: Any) -> Any:
            opt.zero_grad()
            loss_of(params, x, t).backward()
            opt.step()

        @dualflow.compile
        def local(x: Any) -> Any:
            return x * 2

        x = dualflow.tensor(np.ones((2, 4), np.float32))
        step(x, dualflow.tensor([0, 1]))
        local(x)
        return step.agreement.comms == {comm.comm_id} and not local.agreement.comms

    assert run_loopback(body, 2) == [True, True]


def test_mismatches_are_collective_mismatch_errors() -> None:
    assert issubclass(CollectiveMismatch, CommunicatorError)
