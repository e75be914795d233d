"""fuse ending a region in a full ``sum``: one ``fused`` node with ``reduce='sum'`` replaces the
chain and the sum, only when the elementwise value is not needed elsewhere; the reference
interpreter gives exactly the unfused graph's results (hypothesis), and the IR round-trips.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualflow.graph_ir import Graph, GraphBuilder, interpret, parse_graph, print_graph, verify
from dualflow.graph_ir.json_format import graph_from_data, graph_to_data
from dualflow.graph_ir.verify import GraphVerifyError
from dualflow.passes.fuse import MIN_FUSE_SIZE, fuse

FULL = {"axis": None, "keepdims": False}


def _ops(graph: Graph) -> list[str]:
    return [n.op for n in graph.nodes]


def _squared_distance(shape: tuple[int, ...], dtype: str = "float32", **sum_attrs) -> Graph:
    """``sum((x - y) ** 2)`` on one line each: m.py:1, m.py:2, m.py:3."""
    b = GraphBuilder("sqdist")
    x, y = b.input(shape, dtype, "x"), b.input(shape, dtype, "y")
    (d,) = b.node("subtract", [x, y], loc="m.py:1")
    (s,) = b.node("power", [d, 2], loc="m.py:2")
    b.output(*b.node("sum", [s], {**FULL, **sum_attrs}, loc="m.py:3"))
    return b.build()


def _same_run(graph: Graph, fused: Graph, inputs: list[np.ndarray]) -> None:
    """The fused graph verifies, round-trips as text, and interprets to the exact same arrays."""
    verify(fused)
    assert print_graph(parse_graph(print_graph(fused))) == print_graph(fused)
    with np.errstate(all="ignore"):
        want, got = interpret(graph, inputs).outputs, interpret(fused, inputs).outputs
    for w, g in zip(want, got):
        assert np.asarray(g).dtype == np.asarray(w).dtype and np.shape(g) == np.shape(w)
        np.testing.assert_array_equal(g, w)


def test_chain_and_sum_become_one_node_golden() -> None:
    graph = _squared_distance((64, 64))
    fused = fuse(graph)  # 4096 elements: exactly the default threshold
    assert print_graph(fused).splitlines()[1].strip() == (
        "%4: float32[] = fused(%0, %1) {args=('a0', 'a1'), dtype='float32', expr=('call', "
        "'power', ('call', 'subtract', ('var', 'a0'), ('var', 'a1')), ('const', 2)), "
        "keepdims=False, locs=('m.py:1', 'm.py:2', 'm.py:3'), reduce='sum'}  # m.py:1"
    )
    assert fused.outputs == graph.outputs  # the sum's own output value
    rng = np.random.default_rng(0)
    _same_run(graph, fused, [rng.standard_normal((64, 64)).astype(np.float32) for _ in "xy"])


@pytest.mark.parametrize("keepdims", [False, True])
def test_one_elementwise_node_is_enough_and_keepdims_is_kept(keepdims: bool) -> None:
    """``(x * x).sum()``: fusing saves the temporary even for a single elementwise node."""
    b = GraphBuilder("sq")
    x = b.input((3, 5), "int32", "x")
    (p,) = b.node("multiply", [x, x], loc="m.py:1")
    (s,) = b.node("sum", [p], {"axis": None, "keepdims": keepdims}, loc="m.py:2")
    b.output(s)
    graph = b.build()
    fused = fuse(graph, min_size=0)
    (node,) = fused.nodes
    assert node.attrs["reduce"] == "sum" and node.attrs["keepdims"] is keepdims
    assert node.outputs == (s,) and s.dtype == "int64"
    assert s.shape == ((1, 1) if keepdims else ())
    _same_run(graph, fused, [np.arange(15, dtype=np.int32).reshape(3, 5)])


def test_escaping_or_shared_elementwise_value_stays_out_of_the_sum() -> None:
    """The squared difference is also returned: it must exist, so the sum reads it."""
    b = GraphBuilder("escape")
    x, y = b.input((8,), "float32"), b.input((8,), "float32")
    (d,) = b.node("subtract", [x, y])
    (s,) = b.node("multiply", [d, d])
    b.output(*b.node("sum", [s], FULL), s)
    assert _ops(fuse(b.build(), min_size=0)) == ["fused", "sum"]
    b = GraphBuilder("shared")  # read by the sum and by another node
    x = b.input((8,), "float32")
    (e,) = b.node("exp", [x])
    (s,) = b.node("sum", [e], FULL)
    b.output(s, *b.node("tanh", [e]))
    assert _ops(fuse(b.build(), min_size=0)) == ["exp", "sum", "tanh"]


def test_update_source_is_not_summed_away() -> None:
    b = GraphBuilder("update")
    x = b.input((8,), "float32")
    w = b.add_state((8,), "float32", "w")
    (h,) = b.node("multiply", [x, w])
    b.update(w, h)
    b.output(*b.node("sum", [h], FULL))
    graph = b.build()
    assert fuse(graph, min_size=0) is graph


@pytest.mark.parametrize("axis", [0, -1, (0, 1)])
def test_a_sum_over_some_axes_is_not_fused(axis) -> None:
    graph = _squared_distance((4, 6), axis=axis)
    assert _ops(fuse(graph, min_size=0)) == ["fused", "sum"]


def test_threshold_counts_the_region_elements_not_the_scalar_output() -> None:
    small = _squared_distance((MIN_FUSE_SIZE - 1,))
    assert fuse(small) is small
    assert _ops(fuse(_squared_distance((MIN_FUSE_SIZE,)))) == ["fused"]


def test_mean_is_sum_times_a_constant_and_keeps_its_multiply() -> None:
    """``mean`` is a composite (sum * 1/n): the sum fuses, the scaling stays a 0-d multiply."""
    b = GraphBuilder("mean")
    x = b.input((16,), "float64")
    (s,) = b.node("sum", [*b.node("exp", [x])], FULL)
    b.output(*b.node("multiply", [s, 1.0 / 16]))
    graph = b.build()
    fused = fuse(graph, min_size=0)
    assert _ops(fused) == ["fused", "multiply"]
    _same_run(graph, fused, [np.linspace(-2, 2, 16)])


def test_broadcast_inputs_and_literal_operand() -> None:
    b = GraphBuilder("outer")
    x, y = b.input((5, 1), "float32"), b.input((1, 7), "float32")
    (m,) = b.node("multiply", [x, y])
    (a,) = b.node("add", [m, 0.25])
    b.output(*b.node("sum", [a], {"axis": None, "keepdims": True}))
    graph = b.build()
    fused = fuse(graph, min_size=0)
    assert _ops(fused) == ["fused"] and fused.outputs[0].shape == (1, 1)
    rng = np.random.default_rng(1)
    _same_run(graph, fused, [rng.standard_normal(s).astype(np.float32) for s in ((5, 1), (1, 7))])


def test_text_and_json_round_trip_keep_the_reduction() -> None:
    fused = fuse(_squared_distance((4, 4), keepdims=True), min_size=0)
    text = print_graph(fused)
    assert "keepdims=True" in text and "reduce='sum'" in text
    assert print_graph(parse_graph(text)) == text
    back = graph_from_data(json.loads(json.dumps(graph_to_data(fused))), {})
    assert print_graph(back) == text
    assert [n.attrs for n in back.nodes] == [n.attrs for n in fused.nodes]


def test_verify_rejects_a_wrong_reduction_node() -> None:
    fused = fuse(_squared_distance((4, 4)), min_size=0)
    text = print_graph(fused)
    with pytest.raises(GraphVerifyError, match="reduce in"):
        verify(parse_graph(text.replace("reduce='sum'", "reduce='prod'")))
    with pytest.raises(GraphVerifyError, match="gives float32"):
        verify(parse_graph(text.replace("%4: float32[]", "%4: float64[]")))
    with pytest.raises(GraphVerifyError, match=r"float32\[1, 1\]"):
        verify(parse_graph(text.replace("keepdims=False", "keepdims=True")))


_UNARY = ("exp", "tanh", "negative", "abs", "relu", "square", "sigmoid")
_BINARY = ("add", "subtract", "multiply", "maximum", "minimum", "greater")
_SHAPES = ((3, 4), (4,), (1, 4), (3, 1), ())


@st.composite
def _chain_then_sum(draw: st.DrawFn) -> tuple[Graph, list[np.ndarray]]:
    """A random elementwise chain over broadcastable inputs, ended by a full sum."""
    dtype = draw(st.sampled_from(["float32", "float64", "int32"]))
    b = GraphBuilder("chain_sum")
    shapes = draw(st.lists(st.sampled_from(_SHAPES), min_size=1, max_size=3))
    values = [b.input(s, dtype) for s in shapes]
    steps = draw(st.integers(1, 6))
    for i in range(steps):
        if draw(st.booleans()):
            op, args = draw(st.sampled_from(_UNARY)), [draw(st.sampled_from(values))]
        else:
            op = draw(st.sampled_from(_BINARY))
            right = draw(st.one_of(st.sampled_from(values), st.sampled_from([0.5, 2, -1])))
            args = [draw(st.sampled_from(values)), right]
        (v,) = b.node(op, args)
        if op == "greater" and i < steps - 1:  # a bool only as the sum's input (int64 sum)
            (v,) = b.node("where", [v, args[0], -1.5])
        values.append(v)
    keepdims = draw(st.booleans())
    b.output(*b.node("sum", [values[-1]], {"axis": None, "keepdims": keepdims}))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    inputs = [(rng.standard_normal(s) * 3).astype(dtype) for s in shapes]
    return b.build(), inputs


@settings(max_examples=60, deadline=None)
@given(_chain_then_sum())
def test_random_chains_ending_in_sum_interpret_identically(
    case: tuple[Graph, list[np.ndarray]],
) -> None:
    graph, inputs = case
    fused = fuse(graph, min_size=0)
    assert fused.nodes[-1].attrs.get("reduce") == "sum"  # the last step only feeds the sum
    assert fused.outputs == graph.outputs
    _same_run(graph, fused, inputs)
