"""The memory planner: no two live values share storage (random graphs), in-place reuse on
elementwise chains but never of inputs/state/outputs, views extend lifetimes, plans reuse buffers
safely across runs, and tracemalloc's measured peak matches the predicted one.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualflow.bench.harness import peak_memory
from dualflow.graph_ir import Graph, GraphBuilder, interpret, verify
from dualflow.passes.fuse import fuse
from dualflow.runtime import lower
from dualflow.runtime import memory as memory_module
from dualflow.runtime.aliasing import alias_roots
from dualflow.runtime.memory import plan_memory

_UNARY = ("exp", "tanh", "negative", "relu", "sqrt", "abs", "sigmoid", "leaky_relu")
_BINARY = ("add", "subtract", "multiply", "maximum")


def _same(got: object, want: object) -> None:
    for g, w in zip(list(got), list(want), strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def _step(b: GraphBuilder, pool: list, choice: int, pick: int, pick2: int) -> None:
    """Append one node reading values of ``pool`` (all of shape (n, n) float64)."""
    x, y = pool[pick % len(pool)], pool[pick2 % len(pool)]
    kind = choice % 7
    if kind == 0:
        op = _UNARY[pick2 % len(_UNARY)]
        attrs = {"slope": 0.1} if op == "leaky_relu" else {}
        (out,) = b.node(op, [b.node("abs", [x])[0]] if op == "sqrt" else [x], attrs)
    elif kind == 1:
        (out,) = b.node(_BINARY[pick % len(_BINARY)], [x, y])
    elif kind == 2:
        (out,) = b.node("transpose", [x], {"axes": (1, 0)})
    elif kind == 3:
        (flat,) = b.node("reshape", [x], {"shape": (x.shape[0] * x.shape[1],)})
        (out,) = b.node("reshape", [flat], {"shape": x.shape})
    elif kind == 4:
        (out,) = b.node("matmul", [x, y])
    elif kind == 5:
        (s,) = b.node("sum", [x], {"axis": 0, "keepdims": True})
        (out,) = b.node("multiply", [y, s])  # broadcast: never in place of s
    else:
        (out,) = b.node("add", [x, 1.5])
    pool.append(out)


@st.composite
def _graphs(draw: st.DrawFn) -> Graph:
    b = GraphBuilder("random")
    n = draw(st.sampled_from([2, 3, 5]))
    pool = [b.input((n, n), "float64", "x"), b.add_state((n, n), "float64", "w")]
    pool.append(b.const(np.linspace(-1, 1, n * n).reshape(n, n), "c"))
    steps = draw(st.lists(st.tuples(*(st.integers(0, 50),) * 3), min_size=1, max_size=25))
    for choice, pick, pick2 in steps:
        _step(b, pool, choice, pick, pick2)
    outs = draw(st.lists(st.integers(0, len(pool) - 1), min_size=1, max_size=3, unique=True))
    b.output(*(pool[i] for i in outs))
    if draw(st.booleans()):
        b.update(pool[1], pool[-1])
    return verify(b.build())


def _check_plan(graph: Graph, seed: int) -> None:
    """Live values never share storage, outputs only live in their own per-run buffers, and
    two runs give the interpreter's results without writing into the first run's outputs."""
    plan = lower(graph)
    memory = plan.memory
    rows = memory.rows
    outputs = {v.id for v in graph.outputs}
    escaping = {v.id for v in (*graph.inputs, *graph.state, *graph.consts)}
    assert not escaping & {r.value for r in rows}
    owners = {b: v.id for b, v in zip(memory.fresh_buffers, memory.fresh)}
    for r in rows:
        if r.value in outputs:
            assert owners.get(r.buffer) == r.value and r.how == "output", r
    for i, a in enumerate(rows):
        for b in rows[i + 1 :]:
            if a.buffer == b.buffer:  # b starts only after a's last reader (or takes it in place)
                assert b.first > a.last or (b.first == a.last and b.how == "inplace")
    rng = np.random.default_rng(seed)
    inputs, state = (
        [rng.normal(size=graph.inputs[0].shape)],
        [rng.normal(size=graph.state[0].shape)],
    )
    before = [a.copy() for a in (*inputs, *state)]
    want = interpret(graph, inputs, state)
    first = plan.run(inputs, state)
    kept = [np.array(o, copy=True) for o in first.outputs]
    second = plan.run(inputs, state)
    for result in (first, second):
        _same(result.outputs, want.outputs)
        _same(result.updates, want.state[: len(result.updates)])
    _same(first.outputs, kept)  # the second run did not write into returned arrays
    _same([*inputs, *state], before)


@settings(max_examples=150, deadline=None)
@given(_graphs(), st.integers(0, 2**31))
def test_live_values_never_share_storage_and_runs_match_the_interpreter(
    graph: Graph, seed: int
) -> None:
    _check_plan(graph, seed)


@settings(max_examples=150, deadline=None)
@given(_graphs(), st.integers(0, 2**31))
def test_outputs_own_per_run_buffers_lent_to_earlier_values(graph: Graph, seed: int) -> None:
    # every output gets its per-run buffer here (the graphs are small): lending is exercised
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(memory_module, "FRESH_MIN_BYTES", 0)
        _check_plan(graph, seed)


def _chain(n: int = 64) -> Graph:
    b = GraphBuilder("chain")
    x = b.input((n, n), "float32", "x")
    (h,) = b.node("exp", [x])
    for op in ("tanh", "negative", "relu", "sigmoid", "abs"):
        (h,) = b.node(op, [h])
    b.output(*b.node("sum", [h], {"axis": None, "keepdims": False}))
    return verify(b.build())


def test_elementwise_chain_runs_in_place_in_one_buffer() -> None:
    plan = lower(_chain())
    rows = plan.memory.rows
    assert len(rows) == 6 and len(plan.memory.buffer_sizes) == 1
    assert [r.how for r in rows] == ["new"] + ["inplace"] * 5
    assert "%" in plan.memory_table() and "predicted peak" in plan.memory_table()
    x = np.random.default_rng(0).normal(size=(64, 64)).astype(np.float32)
    kept = x.copy()
    _same(plan.run([x], []).outputs, interpret(plan.graph, [x]).outputs)
    _same([x], [kept])  # the input was never the in-place target


def test_inputs_state_and_outputs_are_never_planned_or_overwritten() -> None:
    b = GraphBuilder("f")
    x, w = b.input((8,), "float64", "x"), b.add_state((8,), "float64", "w")
    (a,) = b.node("exp", [x])  # x dies here: still never written
    (new_w,) = b.node("add", [w, a])  # w dies here: still never written
    (out,) = b.node("tanh", [new_w])
    (r,) = b.node("reshape", [out], {"shape": (2, 4)})  # an output aliasing `out`
    b.update(w, new_w)
    b.output(r)
    graph = verify(b.build())
    assert [r.value for r in plan_memory(graph).rows] == [a.id]
    xs, ws = np.linspace(0, 1, 8), np.linspace(1, 2, 8)
    result = lower(graph).run([xs], [ws])
    _same(result.outputs, interpret(graph, [xs], [ws]).outputs)
    assert np.array_equal(xs, np.linspace(0, 1, 8)) and np.array_equal(ws, np.linspace(1, 2, 8))


def test_a_view_keeps_its_base_buffer_alive() -> None:
    """``t`` is a view of ``a``; reusing a's buffer once ``a`` itself is dead would corrupt t."""
    b = GraphBuilder("views")
    x = b.input((4, 4), "float64", "x")
    (a,) = b.node("exp", [x])
    (t,) = b.node("transpose", [a], {"axes": (1, 0)})
    (c,) = b.node("tanh", [x])  # a is dead as a name here, alive through t
    (d,) = b.node("negative", [c])  # would take a's buffer if views did not count
    (e,) = b.node("add", [t, d])
    b.output(*b.node("sum", [e], {"axis": None, "keepdims": False}))
    graph = verify(b.build())
    assert alias_roots(graph)[t] == {a}
    rows = {r.value: r for r in plan_memory(graph).rows}
    assert rows[a.id].last == 4  # released after t's last reader, not a's
    assert rows[d.id].buffer != rows[a.id].buffer
    xs = np.arange(16.0).reshape(4, 4) / 16
    _same(lower(graph).run([xs], []).outputs, interpret(graph, [xs]).outputs)


def _mlp(layers: int = 8, batch: int = 256, width: int = 512) -> tuple[Graph, list, list]:
    rng = np.random.default_rng(0)
    b = GraphBuilder("mlp")
    h = b.input((batch, width), "float32", "x")
    for i in range(layers):
        w = b.const(rng.normal(size=(width, width)).astype(np.float32) / width**0.5, f"w{i}")
        bias = b.const(rng.normal(size=(width,)).astype(np.float32), f"b{i}")
        (m,) = b.node("matmul", [h, w])
        (s,) = b.node("add", [m, bias])
        (h,) = b.node("relu", [s])
    b.output(h)
    return verify(b.build()), [rng.normal(size=(batch, width)).astype(np.float32)], []


def test_measured_peak_matches_the_prediction_on_an_mlp() -> None:
    graph, inputs, state = _mlp()
    # the process's own first-use work (a kernel loaded from the store at its first call, e.g.
    # the native crew's wake-up after a GEMM once an earlier test started the crew) runs here,
    # in another plan of the graph, so the peaks below are this plan's alone
    lower(graph).run(inputs, state)
    plan = lower(graph)
    act = 256 * 512 * 4
    # matmul and add+relu in place, ping-pong between one pooled buffer and the returned
    # output's own per-run buffer (lent to every other layer before the last one writes it)
    memory = plan.memory
    assert (memory.buffer_bytes, memory.fresh_bytes, memory.dynamic_peak) == (act, act, 0)
    assert {"lent", "inplace", "output"} <= {r.how for r in memory.rows}
    cold = peak_memory(lambda: plan.run(inputs, state))  # allocates the pooled buffer too
    assert abs(cold - plan.predicted_peak) <= 0.1 * plan.predicted_peak, (cold, plan.predicted_peak)
    # the pooled buffer exists and the dropped output is written again: nothing new
    held = plan.held_bytes
    assert held == memory.buffer_bytes + memory.fresh_bytes
    warm = peak_memory(lambda: plan.run(inputs, state))
    assert abs(warm + held - plan.predicted_peak) <= 0.1 * plan.predicted_peak, (warm, held)
    kept = plan.run(inputs, state)  # an output the caller keeps: the next run allocates anew
    warm = peak_memory(lambda: plan.run(inputs, state))
    assert abs(warm - memory.fresh_bytes) <= 0.1 * memory.fresh_bytes, warm
    assert kept.outputs is not None
    unplanned = lower(graph, plan_memory=False)
    assert unplanned.predicted_peak is None
    _same(plan.run(inputs, state).outputs, unplanned.run(inputs, state).outputs)


def test_fused_steps_are_planned_in_place_but_never_over_a_broadcast_input() -> None:
    """A fused region takes its dying same-shape input's buffer; a ``where`` one does not."""
    b = GraphBuilder("fused")
    x, y = b.input((64, 33), "float32", "x"), b.input((33,), "float32", "y")
    (a,) = b.node("matmul", [x, b.input((33, 33), "float32", "z")])
    (h,) = b.node("multiply", [a, 0.5])
    (h,) = b.node("tanh", [*b.node("add", [h, y])])  # y broadcasts
    (g,) = b.node("matmul", [h, *b.node("transpose", [h], {"axes": (1, 0)})])
    (w,) = b.node("where", [*b.node("greater", [g, 0.0]), g, 1.0])
    # a sum over one axis: a full one would join the region and `w` would never exist
    b.output(*b.node("sum", [w], {"axis": 0, "keepdims": False}))
    graph = fuse(verify(b.build()), min_size=0)
    assert [n.op for n in graph.nodes].count("fused") == 2
    rows = {r.value: r for r in plan_memory(graph).rows}
    assert rows[h.id].how == "inplace" and rows[h.id].buffer == rows[a.id].buffer
    assert rows[w.id].how != "inplace"  # `where` writes its output in two passes
    rng = np.random.default_rng(3)
    inputs = [rng.normal(size=s).astype(np.float32) for s in ((64, 33), (33,), (33, 33))]
    kept = [i.copy() for i in inputs]
    plan = lower(graph)
    for _ in range(2):
        _same(plan.run(inputs, []).outputs, interpret(graph, inputs).outputs)
    _same(inputs, kept)


def test_a_step_over_transposed_operands_is_not_planned() -> None:
    """``add(a.T, b.T)`` is F-ordered in eager numpy: its checked kernel never writes a C
    buffer, so the plan gives it none (it would sit unused) and counts it as allocated."""
    b = GraphBuilder("transposed")
    x = b.input((64, 32), "float32", "x")
    (a,) = b.node("exp", [x])
    (c,) = b.node("tanh", [x])
    (at,) = b.node("transpose", [a], {"axes": (1, 0)})
    (ct,) = b.node("transpose", [c], {"axes": (1, 0)})
    (s,) = b.node("add", [at, ct])
    b.output(*b.node("sum", [s], {"axis": 0, "keepdims": False}))
    graph = verify(b.build())
    memory = plan_memory(graph)
    assert s.id not in {r.value for r in memory.rows} and {a.id, c.id} <= {
        r.value for r in memory.rows
    }
    assert memory.dynamic_peak >= s.nbytes
    xs = np.random.default_rng(0).normal(size=(64, 32)).astype(np.float32)
    _same(lower(graph).run([xs], []).outputs, interpret(graph, [xs]).outputs)


def test_a_step_written_over_its_input_gets_that_inputs_array() -> None:
    # one view object per buffer, shape and dtype: ``out is input`` lets a kernel read the input
    # through ``out`` (with two pointers to one array LLVM left the loop scalar, 3-8x slower)
    b = GraphBuilder("f")
    x = b.input((16, 16), "float32")
    (y,) = b.node("exp", [x])
    (z,) = b.node("tanh", [y])
    (s,) = b.node("sum", [z], {"axis": 0, "keepdims": False})
    (w,) = b.node("multiply", [z, s])
    b.output(*b.node("sum", [w], {"axis": None, "keepdims": False}))
    plan = plan_memory(b.build())
    hows = {value: row.how for value, row in zip(plan.planned, plan.rows)}
    assert (hows[y], hows[z], hows[w]) == ("new", "inplace", "inplace")
    arrays = dict(zip(plan.planned, plan.allocate(np)))
    assert arrays[z] is arrays[y] and arrays[w] is arrays[y]
    assert s not in arrays or arrays[s] is not arrays[y]  # another shape: its own view
    graph = b.build()
    x0 = np.random.default_rng(0).normal(size=(16, 16)).astype(np.float32)
    _same(lower(graph).run([x0], []).outputs, interpret(graph, [x0]).outputs)


def test_a_value_lent_an_outputs_buffer_in_its_shape_is_that_output(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # exp's value lives in the output's per-run buffer and tanh writes over it there: out is
    # input there too (views made per run were new objects, so the kernel's loop stayed scalar)
    monkeypatch.setattr(memory_module, "FRESH_MIN_BYTES", 0)
    b = GraphBuilder("f")
    x = b.input((16, 16), "float32")
    (y,) = b.node("exp", [x])
    (w,) = b.node("tanh", [y])
    (s,) = b.node("sum", [w], {"axis": None, "keepdims": False})
    (z,) = b.node("multiply", [x, s])
    b.output(z)
    graph = b.build()
    memory = plan_memory(graph)
    hows = {value: row.how for value, row in zip(memory.planned, memory.rows)}
    assert (hows[y], hows[w], hows[z]) == ("lent", "inplace", "output")
    arrays = dict(zip(memory.planned, memory.per_run(np, memory.allocate(np))))
    assert arrays[y] is arrays[w] is arrays[z] and arrays[z].base is None
    x0 = np.random.default_rng(1).normal(size=(16, 16)).astype(np.float32)
    _same(lower(graph).run([x0], []).outputs, interpret(graph, [x0]).outputs)
