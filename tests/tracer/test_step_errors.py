"""A plan step that raises (an index past a row, a label out of range) makes the compiled call
raise eager's very error, text and line included, and change nothing: the call re-runs eagerly
from the state it found. Where a state array already holds new values (a donated update before
the failing step), it cannot re-run: the step's own error is raised, located at its line.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import nn


def _take(x, index):
    return x[index] * 2.0


def _eager_error(fn, *args) -> tuple[str, str]:
    with pytest.raises(Exception) as caught:
        fn(*args)
    return type(caught.value).__name__, str(caught.value)


def test_an_index_out_of_range_in_a_plan_raises_eagers_very_error() -> None:
    x = dualflow.tensor(np.arange(12.0).reshape(4, 3))
    fn = dualflow.compile(_take)
    for _ in range(2):  # a trace, then a plan run
        fn(x, dualflow.tensor(np.array([0, 1])))
    bad = dualflow.tensor(np.array([0, 7]))
    want = _eager_error(_take, x, bad)
    assert _eager_error(fn, x, bad) == want
    assert "test_step_errors.py" in want[1]  # eager names this file's line, and so does the plan
    stats = fn.stats()
    assert stats.traces == 1 and stats.step_errors == 1 and stats.plan_runs == 2
    assert fn(x, dualflow.tensor(np.array([3, 2]))).tolist() == _take(x, [3, 2]).tolist()


def test_a_failing_training_step_changes_nothing_and_raises_eagers_error() -> None:
    dualflow.manual_seed(0)
    model = nn.Embedding(5, 3)
    opt = dualflow.optim.SGD(model.parameters(), lr=0.1)

    def step(labels):
        opt.zero_grad()
        loss = model(labels).sum()
        loss.backward()
        opt.step()
        return loss

    fn = dualflow.compile(step)
    for _ in range(2):
        fn(dualflow.tensor(np.array([0, 1, 2])))
    before = model.weight.detach().numpy().copy()
    grad = model.weight.grad.numpy().copy()
    with pytest.raises(Exception) as compiled:
        fn(dualflow.tensor(np.array([0, 9, 2])))
    assert np.array_equal(model.weight.detach().numpy(), before)  # all or nothing
    assert np.array_equal(model.weight.grad.numpy(), grad)
    with pytest.raises(Exception) as eager:
        step(dualflow.tensor(np.array([0, 9, 2])))
    assert (type(compiled.value), str(compiled.value)) == (type(eager.value), str(eager.value))
    assert fn.stats().step_errors == 1


def test_a_plan_that_raises_where_eager_does_not_returns_eagers_result_and_warns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    x = dualflow.tensor(np.arange(6.0))
    fn = dualflow.compile(lambda t: (t * 3.0).exp())
    fn(x)
    fn(x)
    (trace,) = [t for traces in fn.traces.values() for t in traces]

    def broken(*args, **kwargs):
        raise ValueError("a kernel that is wrong")

    monkeypatch.setattr(trace.plan, "run", broken)
    with pytest.warns(RuntimeWarning, match="(?s)a kernel that is wrong.*ran eagerly") as seen:
        out = fn(x)
    assert seen[0].filename == __file__  # the warning names the caller's line
    assert out.tolist() == (x * 3.0).exp().tolist()
    assert fn.stats().step_errors == 1


def test_a_step_failing_after_a_donated_update_raises_its_own_error_located() -> None:
    w = dualflow.tensor(np.ones(4, np.float32))

    def step(g):
        dualflow.ops.assign(w, w - g)  # donated: written into w's array during the run
        return (w * 2.0).sum()

    fn = dualflow.compile(step)
    for _ in range(2):
        fn(dualflow.tensor(np.ones(4, np.float32)))
    (trace,) = [t for traces in fn.traces.values() for t in traces]
    plan = trace.plan
    assert plan.donated  # the update is written in place
    writer = max(plan.graph.nodes.index(plan.graph.producers[v]) for v in plan.donated)
    later = len(plan.graph.nodes) - 1
    assert later > writer
    namespace = plan._run.__globals__

    def failing(*args, **kwargs):
        raise dualflow.errors.DualflowError("a later step failed")

    original = namespace[f"k{later}"]
    namespace[f"k{later}"] = failing
    try:
        with pytest.raises(dualflow.errors.DualflowError, match="a later step failed"):
            fn(dualflow.tensor(np.ones(4, np.float32)))
    finally:
        namespace[f"k{later}"] = original
    assert fn.stats().step_errors == 0  # not re-run: w already holds the new values


def test_lazily_an_op_failing_on_its_values_raises_at_its_line_before_later_python() -> None:
    x = dualflow.tensor(np.arange(12.0).reshape(4, 3))
    seen: list[str] = []

    def take_then_note(t, index):
        y = t[index] * 2.0
        seen.append("after the index")  # eager never gets here when the index fails
        return y.sum()

    fn = dualflow.compile(take_then_note, lazy="always")
    for _ in range(3):  # the segments run as plans by now
        fn(x, dualflow.tensor(np.array([0, 1])))
    seen.clear()
    bad = dualflow.tensor(np.array([0, 7]))
    want = _eager_error(take_then_note, x, bad)
    assert seen == []
    assert _eager_error(fn, x, bad) == want
    assert seen == []
    assert fn.stats().lazy_calls == 4
