"""The call policies of ``tracer/collective_agreement.py`` as seen from one process."""

from __future__ import annotations

import numpy as np

import dualflow
from dualflow.tracer.collective_agreement import (
    LOCAL,
    CollectiveAgreement,
    LocalAgreement,
)


def _step_with(agreement: object | None) -> tuple[list, object]:
    w = dualflow.tensor(np.arange(3, dtype=np.float32))

    @dualflow.compile
    def step(x: dualflow.Tensor) -> dualflow.Tensor:
        w.add_(x)
        return (w * x).sum()

    if agreement is not None:
        step.agreement = agreement
    out = [step(dualflow.tensor(np.full(3, k, np.float32))).item() for k in range(4)]
    return out + w.tolist(), step.stats()


def test_a_compiled_function_holds_a_collective_policy_with_no_communicators_seen() -> None:
    @dualflow.compile
    def double(x: dualflow.Tensor) -> dualflow.Tensor:
        return x * 2

    double(dualflow.tensor([1.0]))
    assert isinstance(double.agreement, CollectiveAgreement)
    assert double.agreement.comms == set() and double.agreement.fn is double


def test_the_local_policy_serves_calls_as_the_collective_one_does_on_one_process() -> None:
    local_out, local_stats = _step_with(LocalAgreement())
    out, stats = _step_with(None)
    assert local_out == out
    assert (local_stats.plan_runs, local_stats.traces) == (stats.plan_runs, stats.traces)
    assert stats.plan_runs > 0


def test_the_local_policy_runs_the_plan_directly() -> None:
    class Plan:
        def run(self, inputs: list, state: list) -> tuple:
            return ("ran", inputs, state)

    class Trace:
        plan = Plan()

    assert LOCAL.run_plan(Trace(), [1], [2]) == ("ran", [1], [2])
    assert LOCAL.going_eager() is None and LOCAL.before_commit() is None
