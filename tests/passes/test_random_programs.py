"""Hypothesis: random small programs (elementwise, shape and reduction ops on 1–2 inputs, with
constants, literals and duplicated subexpressions) compute the same after every pass/pipeline."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dualflow.errors import DualflowError
from dualflow.graph_ir import Graph, GraphBuilder, verify
from dualflow.passes import PASSES, run_passes
from tests.passes.programs import assert_same_run

UNARY = ["exp", "negative", "tanh", "relu", "abs", "sin", "stop_gradient", "square"]
BINARY = ["add", "subtract", "multiply", "divide", "maximum"]
LITERALS = [0, 1, 0.0, 1.0, 2.5, -1.0]
SHAPES = [(2, 3), (3,), (3, 2), (1, 3)]


def _step(draw, b: GraphBuilder, pool: list, consts: list) -> None:
    kind = draw(
        st.sampled_from(["unary", "binary", "binary", "shape", "reduce", "cast", "dup", "muladd"])
    )
    x = draw(st.sampled_from(pool))
    if kind == "unary":
        b.node(draw(st.sampled_from(UNARY)), [x])
    elif kind == "binary":
        other = draw(st.one_of(st.sampled_from(pool + consts), st.sampled_from(LITERALS)))
        args = [x, other] if draw(st.booleans()) else [other, x]
        b.node(draw(st.sampled_from(BINARY)), args)
    elif kind == "shape":
        op = draw(st.sampled_from(["transpose", "reshape"]))
        if op == "transpose":
            axes = draw(st.sampled_from([None, tuple(range(len(x.shape)))[::-1]]))
            b.node("transpose", [x], {"axes": axes})
        else:
            b.node("reshape", [x], {"shape": draw(st.sampled_from([(-1,), x.shape, (3, -1)]))})
    elif kind == "reduce":
        b.node("sum", [x], {"axis": -1 if x.shape else None, "keepdims": draw(st.booleans())})
    elif kind == "cast":
        b.node("cast", [x], {"dtype": draw(st.sampled_from(["float64", "float32"]))})
    elif kind == "muladd":  # the multiply+add pattern that fold turns into fma
        (m,) = b.node("multiply", [x, draw(st.sampled_from(pool + LITERALS))])
        other = draw(st.sampled_from(pool))
        b.node("add", [m, other] if draw(st.booleans()) else [other, m])
    else:  # repeat an earlier node on the same inputs: a common subexpression
        node = draw(st.sampled_from(b.nodes)) if b.nodes else None
        if node is not None and node.op != "guard":
            b.node(node.op, list(node.inputs), dict(node.attrs))


@st.composite
def programs(draw) -> Graph:
    b = GraphBuilder("random")
    pool = [b.input((2, 3), "float64", "x")]
    if draw(st.booleans()):
        pool.append(b.input(draw(st.sampled_from(SHAPES)), "float64", "y"))
    w = b.add_state((2, 3), "float64", "w")
    pool.append(w)
    consts = []
    for _ in range(draw(st.integers(0, 3))):
        fill = draw(st.sampled_from([0.0, 1.0, 0.5, -2.0]))
        consts.append(b.const(np.full(draw(st.sampled_from(SHAPES)), fill)))
    pool += consts
    for _ in range(draw(st.integers(1, 12))):
        try:
            _step(draw, b, pool, consts)
        except (DualflowError, ValueError, TypeError):
            continue  # shapes or dtypes that do not fit: draw another step
        pool.extend(b.nodes[-1].outputs if b.nodes else ())
    made = [v for n in b.nodes for v in n.outputs]
    same = [v for v in made if v.shape == w.shape and v.dtype == w.dtype]
    if same:
        b.update(w, draw(st.sampled_from(same)))
    b.output(*draw(st.lists(st.sampled_from(made or pool), min_size=1, max_size=3)))
    return b.build()


def _layout(array: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The array as given, F-ordered, or a strided view (arguments may arrive in any layout),
    with some elements -0.0 (folding ``x + 0.0`` would turn them into 0.0)."""
    array = np.where(rng.random(array.shape) < 0.2, -0.0, array)
    kind = rng.integers(0, 3)
    if kind == 1:
        return np.asfortranarray(array)
    if kind == 2:
        return np.repeat(array, 2, axis=-1)[..., ::2]
    return array


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.integers(0, 2**16))
def test_every_pass_and_pipeline_preserves_results(graph: Graph, seed: int) -> None:
    verify(graph)
    rng = np.random.default_rng(seed)
    inputs = [_layout(rng.uniform(-2, 2, v.shape), rng) for v in graph.inputs]
    state = [rng.uniform(-2, 2, v.shape) for v in graph.state]
    with np.errstate(all="ignore"):
        pipelines = ["O1", "O2", "exact", ("dce",), ("cse",), ("fold",), ("cse", "fold", "dce")]
        for passes in pipelines:
            out, _ = run_passes(graph, passes, verify_each=True)
            assert_same_run(graph, out, inputs, state)
        for name, run in PASSES.items():
            once = run(graph)
            assert run(once) is once, f"{name} is not idempotent"
