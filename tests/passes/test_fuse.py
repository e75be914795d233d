"""fuse: golden before/after IR on small programs, and interpret(fuse(g)) == interpret(g) on
hypothesis-generated elementwise programs with broadcasting (exact: both run numpy ufuncs).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dualflow.graph_ir import Graph, GraphBuilder, interpret, verify
from dualflow.graph_ir.parser import parse_graph
from dualflow.passes.fuse import fuse


def _ops(graph: Graph) -> list[str]:
    return [n.op for n in graph.nodes]


def _same_run(graph: Graph, fused: Graph, inputs: list[np.ndarray]) -> None:
    verify(fused)
    assert str(parse_graph(str(fused))) == str(fused)
    want, got = interpret(graph, inputs).outputs, interpret(fused, inputs).outputs
    for w, g in zip(want, got):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_array_equal(g, w)


def test_chain_golden_with_locs() -> None:
    b = GraphBuilder("f")
    x = b.input((8,), "float32", "x")
    (h,) = b.node("multiply", [x, 0.5], loc="m.py:1")
    (t,) = b.node("tanh", [h], loc="m.py:2")
    b.output(*b.node("add", [t, 1], loc="m.py:3"))
    fused = fuse(b.build(), min_size=0)
    assert str(fused).splitlines()[1].strip() == (
        "%3: float32[8] = fused(%0) {args=('a0',), dtype='float32', expr=('call', 'add', "
        "('call', 'tanh', ('call', 'multiply', ('var', 'a0'), ('const', 0.5))), ('const', 1)), "
        "locs=('m.py:1', 'm.py:2', 'm.py:3')}  # m.py:1"
    )


def test_broadcasting_and_intermediate_output_kept() -> None:
    b = GraphBuilder("f")
    x = b.input((4, 3), "float32", "x")
    y = b.input((3,), "float32", "y")
    (h,) = b.node("add", [x, y], loc="m.py:1")
    (t,) = b.node("tanh", [h], loc="m.py:2")  # also an output: must stay materialized
    (s,) = b.node("multiply", [t, y], loc="m.py:3")
    (r,) = b.node("subtract", [s, x], loc="m.py:4")
    b.output(r, t)
    graph = b.build()
    fused = fuse(graph, min_size=0)
    assert _ops(fused) == ["fused", "fused"]
    assert [n.attrs["locs"] for n in fused.nodes] == [("m.py:1", "m.py:2"), ("m.py:3", "m.py:4")]
    assert fused.nodes[1].inputs == (t, y, x)
    rng = np.random.default_rng(0)
    _same_run(graph, fused, [rng.standard_normal(s).astype(np.float32) for s in ((4, 3), (3,))])


def test_diamond_is_one_region() -> None:
    b = GraphBuilder("f")
    x = b.input((5,), "float64", "x")
    (a,) = b.node("exp", [x])
    (left,) = b.node("multiply", [a, 2.0])
    (r,) = b.node("sqrt", [a])
    b.output(*b.node("add", [left, r]))
    graph = b.build()
    fused = fuse(graph, min_size=0)
    assert _ops(fused) == ["fused"]
    _same_run(graph, fused, [np.linspace(-1, 1, 5)])


def test_would_be_cycle_through_reduction_is_rejected() -> None:
    """exp feeds sum (not elementwise) and the multiply that also reads the sum: fusing exp into
    the multiply would need the sum before the fused node and the fused node before the sum."""
    b = GraphBuilder("f")
    x = b.input((6,), "float32", "x")
    (e,) = b.node("exp", [x], loc="m.py:1")
    (s,) = b.node("sum", [e], {"axis": None, "keepdims": False}, loc="m.py:2")
    (d,) = b.node("divide", [e, s], loc="m.py:3")
    b.output(*b.node("add", [d, 1.0], loc="m.py:4"))
    graph = b.build()
    fused = fuse(graph, min_size=0)
    assert _ops(fused) == ["exp", "sum", "fused"]
    assert fused.nodes[2].attrs["locs"] == ("m.py:3", "m.py:4")
    _same_run(graph, fused, [np.arange(6, dtype=np.float32)])


def test_nothing_to_fuse_returns_same_object_and_cost_model() -> None:
    b = GraphBuilder("f")
    x = b.input((8,), "float32")
    b.output(*b.node("exp", [x]))  # one node: no region of two
    graph = b.build()
    assert fuse(graph, min_size=0) is graph
    b = GraphBuilder("g")
    x = b.input((8,), "float32")
    (h,) = b.node("exp", [x])
    b.output(*b.node("tanh", [h]))
    small = b.build()
    assert fuse(small) is small  # 8 elements: below the default MIN_FUSE_SIZE
    assert _ops(fuse(small, min_size=8)) == ["fused"]


def test_one_big_elementwise_node_is_a_region_of_its_own() -> None:
    # one ufunc call (maximum) from the CPU model's single_size; two (relu_grad's where and
    # greater) from its min_size, like a region of two one-call nodes
    from dualflow.kernels.backend import CPU_FUSION

    MIN_FUSE_SIZE, MIN_SINGLE_SIZE = CPU_FUSION.min_size, CPU_FUSION.single_size

    cases = [
        ("maximum", MIN_SINGLE_SIZE, ["fused"]),
        ("maximum", MIN_SINGLE_SIZE - 1, ["maximum"]),
        ("relu_grad", MIN_FUSE_SIZE, ["fused"]),
        ("relu_grad", MIN_FUSE_SIZE - 1, ["relu_grad"]),
    ]
    for op, size, want in cases:
        b = GraphBuilder("f")
        y, gy = b.input((size,), "float32"), b.input((size,), "float32")
        b.output(*b.node(op, [y, gy]))
        graph = b.build()
        assert _ops(fuse(graph)) == want, (op, size)
        rng = np.random.default_rng(0)
        inputs = [rng.standard_normal(size).astype(np.float32) for _ in range(2)]
        inputs[0][:4] = [np.nan, -0.0, 0.0, np.inf]
        _same_run(graph, fuse(graph), inputs)


def test_a_long_arithmetic_region_fuses_at_any_size_a_transcendental_one_does_not() -> None:
    from dualflow.kernels.backend import CPU_FUSION

    MIN_FUSE_OPS = CPU_FUSION.min_ops

    def chain(ops: list[str]) -> Graph:
        b = GraphBuilder("f")
        x, w = b.input((4, 4), "float32"), b.input((4, 4), "float32")
        h = x
        for op in ops:
            (h,) = b.node(op, [h] if op in ("tanh", "sin") else [h, w])
        b.output(h)
        return b.build()

    arithmetic = chain((["add", "multiply"] * MIN_FUSE_OPS)[:MIN_FUSE_OPS])
    assert _ops(fuse(arithmetic)) == ["fused"]
    rng = np.random.default_rng(0)
    _same_run(arithmetic, fuse(arithmetic), [rng.standard_normal((4, 4), np.float32)] * 2)
    short = chain((["add", "multiply"] * MIN_FUSE_OPS)[: MIN_FUSE_OPS - 1])
    assert "fused" not in _ops(fuse(short))  # too short for its size
    with_sin = chain((["add", "sin"] * MIN_FUSE_OPS)[:MIN_FUSE_OPS])
    assert "fused" not in _ops(fuse(with_sin))  # the blocked evaluator would not save calls
    with_tanh = chain(
        (["add", "tanh"] * MIN_FUSE_OPS)[:MIN_FUSE_OPS]
    )  # float32: fast_tanh, one loop
    assert _ops(fuse(with_tanh)) == ["fused"]
    _same_run(with_tanh, fuse(with_tanh), [rng.standard_normal((4, 4), np.float32)] * 2)


def test_update_source_and_impure_stay_out() -> None:
    b = GraphBuilder("f")
    x = b.input((4,), "float32")
    w = b.add_state((4,), "float32", "w")
    (h,) = b.node("multiply", [x, w])
    (t,) = b.node("exp", [h])
    b.update(w, h)
    b.output(*b.node("add", [t, x]))
    graph = b.build()
    fused = fuse(graph, min_size=0)
    assert _ops(fused) == ["multiply", "fused"]
    assert fused.updates == ((w, h),)


_UNARY = ("exp", "tanh", "negative", "abs", "sigmoid", "relu", "square")
_BINARY = ("add", "subtract", "multiply", "maximum", "minimum")
_SHAPES = ((3, 4), (4,), (1, 4), (3, 1), ())


@st.composite
def _program(draw: st.DrawFn) -> tuple[Graph, list[np.ndarray]]:
    dtype = draw(st.sampled_from(["float32", "float64"]))
    b = GraphBuilder("random")
    shapes = draw(st.lists(st.sampled_from(_SHAPES), min_size=1, max_size=3))
    values = [b.input(s, dtype) for s in shapes]
    for _ in range(draw(st.integers(1, 8))):
        if draw(st.booleans()):
            op, args = draw(st.sampled_from(_UNARY)), [draw(st.sampled_from(values))]
        else:
            op = draw(st.sampled_from(_BINARY))
            right = draw(st.one_of(st.sampled_from(values), st.sampled_from([0.5, 2, -1.5])))
            args = [draw(st.sampled_from(values)), right]
        if draw(st.integers(0, 9)) == 0:  # now and then a non-elementwise op in the middle
            op, args = "sum", [args[0]]
            (v,) = b.node(op, args, {"axis": None, "keepdims": True})
        else:
            (v,) = b.node(op, args)
        values.append(v)
    outs = draw(st.lists(st.sampled_from(values[len(shapes) :]), min_size=1, max_size=2))
    b.output(*outs)
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    return b.build(), [rng.standard_normal(s).astype(dtype) for s in shapes]


@settings(max_examples=60, deadline=None)
@given(_program())
def test_random_programs_interpret_identically(case: tuple[Graph, list[np.ndarray]]) -> None:
    graph, inputs = case
    fused = fuse(graph, min_size=0)
    assert len(fused.nodes) <= len(graph.nodes)
    with np.errstate(all="ignore"):
        _same_run(graph, fused, inputs)
