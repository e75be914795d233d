"""Outputs that are arguments or captured tensors are those very objects, as in eager mode;
an output holding the old value of updated state keeps it; an assign into a view of state fails
closed (issue 13 follow-ups found by the PyTorch compatibility tables)."""

from __future__ import annotations

import warnings

import dualflow
from dualflow import ops


def test_returning_an_argument_returns_it_and_gradients_flow() -> None:
    x = dualflow.tensor([1.0, 2.0], requires_grad=True)
    compiled = dualflow.compile(lambda x: (x, x * 2))
    for _ in range(3):
        x.grad = None
        a, b = compiled(x)
        (a.sum() + b.sum()).backward()
        assert a is x and x.grad.tolist() == [3.0, 3.0]
    assert compiled.stats().plan_runs == 2


def test_returning_updated_state_returns_the_state_tensor() -> None:
    w = dualflow.tensor([1.0, 2.0])

    def step(s):
        ops.assign(w, w * s)
        return w

    compiled = dualflow.compile(step)
    for expected in ([2.0, 4.0], [4.0, 8.0], [8.0, 16.0]):
        out = compiled(dualflow.tensor(2.0))
        assert out is w and out.tolist() == expected


def test_an_output_of_the_old_state_keeps_the_old_values() -> None:
    w = dualflow.tensor([1.0, 2.0])

    def step(s):
        before = w * 1.0  # folded into w itself by the passes
        ops.assign(w, w * s)
        return before

    compiled = dualflow.compile(step)
    for expected in ([1.0, 2.0], [2.0, 4.0], [4.0, 8.0]):
        assert compiled(dualflow.tensor(2.0)).tolist() == expected


def test_assign_into_a_view_of_state_fails_closed_and_stays_right() -> None:
    w = dualflow.tensor([1.0, 2.0, 3.0])

    def step(v):
        ops.assign(w[0:1], v)
        return w * 1

    compiled = dualflow.compile(step)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for v in (5.0, 6.0, 7.0):
            assert compiled(dualflow.tensor([v])).tolist() == [v, 2.0, 3.0]
    assert any("view of a captured" in str(c.message) for c in caught)


def _pair(x):
    return [x * 2, x + 1]


def test_a_list_result_is_a_new_list_at_every_call_as_in_eager() -> None:
    """A call's result rebuilt by its trace's short builder (``pytree.rebuilder``): a list of
    tensors is a new list at every call, so a caller's change to one reaches no later call; a
    tuple holding Python values beside a tensor (the full rebuild) keeps them."""
    x = dualflow.tensor([1.0, 2.0])
    compiled = dualflow.compile(_pair)
    for _ in range(3):
        got, want = compiled(x), _pair(x)
        assert type(got) is list and [t.tolist() for t in got] == [t.tolist() for t in want]
        got.append("the caller's")  # its own list only
    assert compiled.stats().plan_runs == 2
    mixed = dualflow.compile(lambda x: (x * 3, "tag", 2))
    for _ in range(3):
        out = mixed(x)
        assert type(out) is tuple and (out[0].tolist(), out[1:]) == ([3.0, 6.0], ("tag", 2))
    assert mixed.stats().plan_runs == 2
