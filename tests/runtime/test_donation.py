"""Donated updates: written into the state's own array when nothing later can need the old value
or fail the call; never otherwise. Plans without ``donate`` leave state untouched; a strided state
array falls back to committing; the in-place numba kernel equals the out-of-place one."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import ops
from dualflow.graph_ir import Graph, GraphBuilder, verify
from dualflow.kernels.expr.typed_program import lower_expr
from dualflow.kernels.numba.numba_elementwise import numba_kernel
from dualflow.nn import Parameter
from dualflow.runtime import lower
from dualflow.runtime.donation import donations


def _sgd(extra: str = "") -> tuple[Graph, object]:
    """w <- w - 0.5 * g, with one variation that must stop (or allow) the donation."""
    b = GraphBuilder("sgd")
    g = b.input((64,), "float32", "g")
    w = b.add_state((64,), "float32", "w")
    (step,) = b.node("multiply", [g, 0.5])
    (new,) = b.node("subtract", [w, step])
    outputs = [b.node("sum", [g], {"axis": None, "keepdims": False})[0]]
    if extra == "guard after":
        b.guard(outputs[0], 1.0, "float", "m.py:9")
    elif extra == "read after":
        outputs.append(b.node("multiply", [w, 2.0])[0])
    elif extra == "view read after":
        (view,) = b.node("reshape", [w], {"shape": (8, 8)})
        outputs.append(b.node("exp", [view])[0])
    elif extra == "returned":
        outputs.append(new)
    b.output(*outputs)
    b.update(w, new)
    return verify(b.build()), new


def test_an_update_after_every_guard_and_read_is_donated() -> None:
    graph, new = _sgd()
    assert donations(graph) == {new: graph.state[0]}


@pytest.mark.parametrize("extra", ["guard after", "read after", "view read after", "returned"])
def test_no_donation_when_the_old_value_or_the_call_could_still_need_it(extra: str) -> None:
    graph, _ = _sgd(extra)
    assert donations(graph) == {}


def test_blas_never_overwrites_an_operand_but_may_write_a_state_it_does_not_read() -> None:
    b = GraphBuilder("mm")
    x = b.input((4, 4), "float32", "x")
    w = b.add_state((4, 4), "float32", "w")
    u = b.add_state((4, 4), "float32", "u")
    (reads_w,) = b.node("matmul", [x, w])
    (fresh,) = b.node("matmul", [x, x])
    b.update(w, reads_w)
    b.update(u, fresh)
    b.output(x)
    assert donations(verify(b.build())) == {fresh: u}


def test_a_donating_plan_writes_the_state_array_and_returns_it() -> None:
    graph, _ = _sgd()
    g, w = np.ones(64, np.float32), np.full(64, 3.0, np.float32)
    untouched = lower(graph).run([g], [w])
    assert w[0] == 3.0 and untouched.updates[0] is not w  # the default: state never written
    debug = lower(graph, donate=True, debug=True)  # debug steps may raise mid-plan: no donation
    assert debug.donated_slots == ()
    plan = lower(graph, donate=True)
    assert plan.donated_slots == (0,)
    result = plan.run([g], [w])
    assert result.updates[0] is w and w.tolist() == [2.5] * 64
    np.testing.assert_array_equal(untouched.updates[0], w)


def test_a_profiled_run_donates_as_the_real_run_does() -> None:
    # explain(profile=True) times the program that runs: an update allocated instead of written
    # in place showed costs the real run never has (a 9 MB weight's SGD step: 27 ms, not 1)
    graph, _ = _sgd()
    g, w = np.ones(64, np.float32), np.full(64, 3.0, np.float32)
    plan = lower(graph, donate=True)
    plan.profile_next = True
    result = plan.run([g], [w])
    assert result.updates[0] is w and w.tolist() == [2.5] * 64
    assert plan.profile_times.shape == (len(graph.nodes),) and plan.profile_times.sum() > 0
    strided = np.full(128, 3.0, np.float32)[::2]  # the checked program, profiled: committed
    plan.profile_next = True
    result = plan.run([g], [strided])
    assert result.updates[0] is not strided and result.updates[0].tolist() == [2.5] * 64


def test_a_strided_state_array_is_committed_instead() -> None:
    graph, _ = _sgd()
    plan = lower(graph, donate=True)
    backing = np.full(128, 3.0, np.float32)
    w = backing[::2]  # a view a kernel must not be handed as out=
    result = plan.run([np.ones(64, np.float32)], [w])
    assert result.updates[0] is not w and w[0] == 3.0
    assert result.updates[0].tolist() == [2.5] * 64


def test_the_in_place_numba_kernel_equals_the_out_of_place_one() -> None:
    expr = (
        "call",
        "subtract",
        ("var", "a0"),
        (
            "call",
            "divide",
            ("var", "a1"),
            ("call", "sqrt", ("call", "power", ("var", "a2"), ("const", 2))),
        ),
    )
    program = lower_expr(expr, ("a0", "a1", "a2"), ("float32", "float32", "float32"))
    kernel = numba_kernel(program, ((1000,), (1000,), ()), (1000,))
    rng = np.random.default_rng(0)
    a0, a1 = rng.normal(size=(2, 1000)).astype(np.float32)
    a2 = np.array(1.5, np.float32)
    want = kernel(np, a0, a1, a2)
    assert kernel(np, a0, a1, a2, out=a0) is a0
    np.testing.assert_array_equal(a0, want)


def test_a_compiled_step_with_a_guard_after_its_update_never_donates() -> None:
    w = Parameter(np.array([1.0, 2.0], np.float32))

    @dualflow.compile
    def step(x):
        ops.assign(w, w - x)
        return w * 2 if float(x.sum()) > 0 else w  # a guard after the update

    step(dualflow.tensor([0.5, 0.5]))
    step(dualflow.tensor([0.5, 0.5]))
    assert step.history[-1].plan.donated_slots == ()
    step(dualflow.tensor([-0.5, -0.5]))  # the guard fails: the plan's writes must not exist
    assert w.tolist() == [0.5, 1.5] and step.stats().guard_failures == 1
