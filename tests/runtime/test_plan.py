"""``runtime.lower(graph).run`` against the reference interpreter on hand-built graphs: guards stop
the run before any update, profiling times every node, and dead intermediates are freed early.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from dualflow.graph_ir import Graph, GraphBuilder, interpret, verify
from dualflow.runtime import lower
from tests.graph_ir.graphs import chain, everything, everything_inputs


def _same(got: object, want: object) -> None:
    got, want = list(got), list(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def _mixed() -> Graph:
    """Broadcasting, matmul, reductions, a multi-output op with an unused output, literals."""
    b = GraphBuilder("mixed")
    x = b.input((3, 4), "float32", "x")
    y = b.input((4,), "float32", "y")
    (h,) = b.node("add", [x, y])
    (m,) = b.node("matmul", [h, b.const(np.ones((4, 2), np.float32))])
    (t,) = b.node("tanh", [m])
    (s,) = b.node("sum", [t], {"axis": 0, "keepdims": True})
    out, mean, _ = b.node(
        "batch_norm",
        [x, b.const(np.ones(4, np.float32)), b.const(np.zeros(4, np.float32))],
        {"eps": 1e-5},
    )
    (r,) = b.node("reshape", [s], {"shape": (2,)})
    (p,) = b.node("power", [r, 2.0])
    (n,) = b.node("subtract", [1.0, p])
    b.output(n, out, mean, x)  # an input returned as it is
    return verify(b.build())


def test_plan_equals_interpreter_on_hand_built_graphs() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=4).astype(np.float32)
    graph = _mixed()
    result = lower(graph).run([x, y], [])
    _same(result.outputs, interpret(graph, [x, y]).outputs)
    assert result.outputs[-1] is x or np.shares_memory(result.outputs[-1], x)

    graph = everything()
    inputs, state = everything_inputs()
    before = [a.copy() for a in (*inputs, *state)]
    plan = lower(graph)
    result, want = plan.run(inputs, state), interpret(graph, inputs, state)
    _same(result.outputs, want.outputs)
    _same(result.updates, [want.state[0]])
    _same([*inputs, *state], before)  # run never writes its inputs or state
    assert plan.steps == len(graph.nodes)


def test_guard_failure_stops_before_later_steps_and_returns_the_node() -> None:
    graph = everything()
    inputs, state = everything_inputs()
    inputs[0] = inputs[0] * 2  # the sum is no longer 4: the float guard fails
    result = lower(graph).run(inputs, state)
    assert result.failed_guard is graph.guards[0]
    assert result.outputs is None and result.updates is None
    assert interpret(graph, inputs, state).failed_guards == [graph.guards[0]]


@pytest.mark.parametrize(
    "kind,expect,passing,failing",
    [
        ("bool", True, np.array(True), np.array(False)),
        ("int", 3, np.array(3), np.array(4)),
        ("float", 0.5, np.array(0.5), np.array(0.25)),
        ("item", 7, np.array(7, np.int64), np.array(8, np.int64)),
    ],
)
def test_each_guard_kind(kind: str, expect: object, passing: object, failing: object) -> None:
    b = GraphBuilder("g")
    v = b.input(passing.shape, passing.dtype, "v")
    b.guard(v, expect, kind, "g.py:1")
    (out,) = b.node("add", [v, 1])
    b.output(out)
    plan = lower(verify(b.build()))
    assert plan.run([passing], []).failed_guard is None
    assert plan.run([failing], []).failed_guard.loc == "g.py:1"


def test_guard_on_a_one_element_vector() -> None:
    b = GraphBuilder("g")
    v = b.input((1,), "float64", "v")
    b.guard(v, 2.0, "float")
    b.output(v)
    assert lower(b.build()).run([np.array([2.0])], []).failed_guard is None


@pytest.mark.parametrize("literal", [float("inf"), float("-inf"), float("nan")])
def test_non_finite_literal_inputs(literal: float) -> None:
    b = GraphBuilder("lit")
    x = b.input((2,), "float64", "x")
    (y,) = b.node("maximum", [x, literal])
    b.output(y)
    graph = b.build()
    x_value = np.array([1.0, -2.0])
    _same(lower(graph).run([x_value], []).outputs, interpret(graph, [x_value]).outputs)


def test_profile_gives_one_time_per_node() -> None:
    graph = everything()
    inputs, state = everything_inputs()
    plan = lower(graph)
    result = plan.run(inputs, state, profile=True)
    assert result.failed_guard is None
    assert plan.profile_times.shape == (len(graph.nodes),)
    table = plan.profile_table()
    assert [op for op, _, _ in table] == [n.op for n in graph.nodes]
    assert [loc for _, loc, _ in table] == [n.loc for n in graph.nodes]
    kernels = [t for (op, _, t) in table if op != "guard"]
    assert all(t > 0 for t in kernels)
    assert all(t >= 0 for _, _, t in table)
    _same(result.outputs, plan.run(inputs, state).outputs)  # profiling changes no result


def test_generated_source_deletes_each_value_after_its_last_use() -> None:
    graph = chain(6, 4)
    source = lower(graph).source
    body = source.splitlines()
    for node in graph.nodes[:-1]:
        (dead,) = node.value_inputs
        line = next(
            i for i, text in enumerate(body) if text.strip().startswith(f"v{node.outputs[0].id} = ")
        )
        assert body[line + 1].strip() == f"del v{dead.id}", source
    assert "del v6" not in source  # the output survives


def test_unused_outputs_are_dropped_at_once() -> None:
    b = GraphBuilder("split")
    x = b.input((4, 4), "float64", "x")
    y, mean, var = b.node(
        "batch_norm", [x, b.const(np.ones(4)), b.const(np.zeros(4))], {"eps": 1e-5}
    )
    b.output(y)
    lines = lower(b.build()).source.splitlines()
    call = next(i for i, text in enumerate(lines) if "k0(" in text)
    assert lines[call + 1].strip().startswith("del ")
    assert {f"v{mean.id}", f"v{var.id}"} <= set(lines[call + 1].strip()[4:].split(", "))


def test_intermediates_are_freed_early() -> None:
    size = 1 << 19  # 4 MiB of float64 per value
    graph = chain(12, size)
    plan = lower(graph)
    x = np.random.default_rng(0).normal(size=size)
    plan.run([x], [])  # warm up
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = plan.run([x], [])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3.5 * x.nbytes, f"peak {peak / x.nbytes:.1f} arrays; 12 would be kept without del"
    _same(result.outputs, interpret(graph, [x]).outputs)


def test_a_host_plan_binds_proven_fused_steps_to_numpys_kernel() -> None:
    # one Python call less per step; a step whose operands may be strided keeps the checking
    # wrapper (it runs eager's own ufuncs for them), and results are the same either way
    from dualflow.passes.fuse import fuse

    b = GraphBuilder("f")
    x = b.input((8, 8), "float32")
    (h,) = b.node("multiply", [x, 0.5])
    (h,) = b.node("add", [h, 1.0])
    b.output(*b.node("multiply", [h, h]))
    graph = fuse(b.build(), min_size=0)
    plan = lower(graph)
    kernel = plan._run.__globals__["k0"]
    assert "fused_kernel" not in kernel.__qualname__, kernel.__qualname__
    checked = plan._checked()
    assert "fused_kernel" in checked.__globals__["k0"].__qualname__
    data = np.arange(64, dtype=np.float32).reshape(8, 8)
    want = (data * 0.5 + 1.0) * (data * 0.5 + 1.0)
    np.testing.assert_array_equal(plan.run([data], []).outputs[0], want)
    strided = np.asfortranarray(data)  # not C-ordered: the plan takes its checked run
    np.testing.assert_array_equal(plan.run([strided], []).outputs[0], want)
