"""The ``bucket_allreduce`` pass: golden IR, collective order, early starts and late waits,
barriers, idempotence, and interpret/plan results equal to the blocking graph's."""

from __future__ import annotations

import numpy as np

import dualflow.passes.bucket_allreduce as module
from dualflow.distributed import create_communicator
from dualflow.graph_ir import Graph, GraphBuilder, interpret, parse_graph, print_graph, verify
from dualflow.passes import O2, run_passes
from dualflow.passes.bucket_allreduce import bucket_allreduce
from dualflow.runtime import lower
from dualflow.runtime.memory import plan_memory
from tests.passes.programs import assert_same_run, docstring_example, mlp_step, random_args

SOLO = create_communicator("loopback")  # one rank: every all-reduce is the identity


def _attrs(reduction: str = "mean") -> dict:
    return {"comm": SOLO.comm_id, "reduction": reduction}


def backward_like(guard: bool = False) -> Graph:
    """Three gradients produced one by one, each followed by unrelated work; the all-reduces
    come after the whole "backward" and their results feed an SGD-like update."""
    b = GraphBuilder("bwd")
    x = b.input((6,), "float32", "x")
    ws = [b.add_state((6,), "float32", f"w{i}") for i in range(3)]
    grads, work = [], x
    for i, w in enumerate(ws):
        (g,) = b.node("multiply", [work, w], loc=f"g.py:{i}")
        grads.append(g)
        (work,) = b.node("tanh", [work], loc=f"w.py:{i}")
        (work,) = b.node("exp", [work], loc=f"w.py:{i}")
    if guard:
        (total,) = b.node("sum", [work], {"axis": None, "keepdims": False})
        b.guard(total, 1.0, "float", loc="guard.py:1")
    reduced = [b.node("allreduce", [g], _attrs(), loc=f"r.py:{i}")[0] for i, g in enumerate(grads)]
    for w, r in zip(ws, reduced):
        (step,) = b.node("multiply", [r, 0.1])
        (new,) = b.node("subtract", [w, step])
        b.update(w, new)
    b.output(work)
    return b.build()


def _index(graph: Graph, op: str) -> list[int]:
    return [i for i, n in enumerate(graph.nodes) if n.op == op]


def test_docstring_example_is_a_golden_test() -> None:
    before_text, after_text = (
        t.replace("comm=1", f"comm={SOLO.comm_id}") for t in docstring_example(module)
    )
    before = verify(parse_graph(before_text))
    assert print_graph(before) == before_text
    after = verify(bucket_allreduce(before))
    assert print_graph(after) == after_text
    inputs, state = random_args(before)
    assert_same_run(before, after, inputs, state)


def test_starts_move_early_and_waits_late() -> None:
    graph = backward_like()
    after = verify(bucket_allreduce(graph))
    ops = [n.op for n in after.nodes]
    assert "allreduce" not in ops
    for start in _index(after, "allreduce_start"):  # right after its gradient's producer
        assert after.nodes[start - 1].outputs[0] is after.nodes[start].inputs[0]
        assert after.nodes[start - 1].op == "multiply"
    # All three are in flight during the rest of the "backward"; each wait sits right before
    # the update step reading its result.
    assert _index(after, "allreduce_start") == [1, 5, 9]
    assert _index(after, "allreduce_wait") == [12, 15, 18]
    for wait in _index(after, "allreduce_wait"):
        assert after.nodes[wait + 1].inputs[0] is after.nodes[wait].outputs[0]


def test_collectives_keep_their_relative_order() -> None:
    graph = backward_like()
    after = bucket_allreduce(graph)
    original = [n.loc for n in graph.nodes if n.op == "allreduce"]
    assert [n.loc for n in after.nodes if n.op == "allreduce_start"] == original
    assert [n.loc for n in after.nodes if n.op == "allreduce_wait"] == original
    for start, wait in zip(_index(after, "allreduce_start"), _index(after, "allreduce_wait")):
        assert start < wait and after.nodes[wait].inputs[0] is after.nodes[start].outputs[0]
    others = [n for n in after.nodes if not n.op.startswith("allreduce")]
    assert others == [n for n in graph.nodes if n.op != "allreduce"]  # untouched otherwise


def test_nothing_crosses_a_guard() -> None:
    after = verify(bucket_allreduce(backward_like(guard=True)))
    guard = _index(after, "guard")[0]
    assert all(i > guard for i in _index(after, "allreduce_start"))
    assert all(i > guard for i in _index(after, "allreduce_wait"))


def test_starts_keep_order_even_when_a_later_input_is_ready_first() -> None:
    b = GraphBuilder("late")
    x = b.input((4,), "float32", "x")
    (early,) = b.node("exp", [x], loc="a.py:1")
    (late,) = b.node("tanh", [early], loc="a.py:2")
    (r1,) = b.node("allreduce", [late], _attrs("sum"), loc="r.py:1")
    (r2,) = b.node("allreduce", [early], _attrs("sum"), loc="r.py:2")
    (r3,) = b.node("allreduce", [r1], _attrs("sum"), loc="r.py:3")  # chained: waits on r1
    b.output(*b.node("add", [r2, r3]))
    graph = b.build()
    after = verify(bucket_allreduce(graph))
    assert [(n.op, n.loc) for n in after.nodes if n.op.startswith("allreduce")] == [
        ("allreduce_start", "r.py:1"),
        ("allreduce_start", "r.py:2"),
        ("allreduce_wait", "r.py:1"),
        ("allreduce_start", "r.py:3"),
        ("allreduce_wait", "r.py:2"),
        ("allreduce_wait", "r.py:3"),
    ]
    assert_same_run(graph, after, [np.arange(4, dtype=np.float32)], [])


def test_idempotent_and_unchanged_graphs_are_returned_as_is() -> None:
    once = bucket_allreduce(backward_like())
    assert bucket_allreduce(once) is once
    plain = mlp_step()
    assert bucket_allreduce(plain) is plain


def test_interpret_and_the_plan_equal_the_blocking_graph() -> None:
    graph = backward_like()
    after, _ = run_passes(graph, O2, verify_each=True)
    assert {n.op for n in after.nodes} >= {"allreduce_start", "allreduce_wait"}
    inputs, state = random_args(graph)
    assert_same_run(graph, bucket_allreduce(graph), inputs, state)
    want = interpret(graph, inputs, state)
    plan = lower(after)
    assert plan.graph.nodes == after.nodes  # lowering keeps the schedule
    for _ in range(2):  # a second run reuses keys and buffers
        got = plan.run(inputs, state)
        for g, w in zip(got.outputs + tuple(got.updates), want.outputs + want.state):
            np.testing.assert_allclose(g, w, rtol=1e-6)


def test_memory_plan_keeps_the_input_alive_until_the_wait() -> None:
    b = GraphBuilder("mem")
    x = b.input((64,), "float32", "x")
    (g,) = b.node("exp", [x])
    (h,) = b.node("allreduce", [g], _attrs("sum"))
    (t,) = b.node("tanh", [x])
    (u,) = b.node("negative", [t])
    (v,) = b.node("add", [h, u])
    b.output(*b.node("sum", [v], {"axis": None, "keepdims": False}))
    after = bucket_allreduce(b.build())
    memory = plan_memory(after)
    rows = {r.value: r for r in memory.rows}
    wait = _index(after, "allreduce_wait")[0]
    assert rows[g.id].last >= wait  # MPI may still read it until then: no one reuses it
    start_and_wait = {n.outputs[0].id for n in after.nodes if n.op.startswith("allreduce")}
    assert not start_and_wait & set(rows)  # they always allocate, never write out=
    out = lower(after).run([np.linspace(0, 1, 64, dtype=np.float32)], []).outputs[0]
    want = interpret(b.build(), [np.linspace(0, 1, 64, dtype=np.float32)]).outputs[0]
    np.testing.assert_allclose(out, want, rtol=1e-6)


def test_large_steps_between_a_start_and_its_wait_test_the_request() -> None:
    # MPI moves a non-blocking transfer only inside MPI calls: after each large step while a
    # request is in flight, an allreduce_progress tests it (small steps are not worth a call).
    b = GraphBuilder("progress")
    x = b.input((module.PROGRESS_ELEMENTS,), "float32", "x")
    (g,) = b.node("exp", [x])
    (r,) = b.node("allreduce", [g], _attrs("sum"))
    (t,) = b.node("tanh", [x])  # large: a test after it
    (s,) = b.node("sum", [t], {"axis": None, "keepdims": False})  # small: none
    (u,) = b.node("multiply", [r, s])
    b.output(u)
    graph = b.build()
    after = verify(bucket_allreduce(graph))
    ops = [n.op for n in after.nodes]
    assert ops == ["exp", "allreduce_start", "tanh", "allreduce_progress", "sum"] + [
        "allreduce_wait",
        "multiply",
    ]
    progress = after.nodes[3]
    assert progress.inputs == (after.nodes[1].outputs[0],) and progress.attrs == {
        "comm": SOLO.comm_id
    }
    assert "allreduce_progress" in print_graph(after)
    assert parse_graph(print_graph(after)) is not None
    inputs = [np.linspace(-1, 1, module.PROGRESS_ELEMENTS, dtype=np.float32)]
    assert_same_run(graph, after, inputs, [])
