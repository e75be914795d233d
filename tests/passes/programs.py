"""Shared helpers of the pass tests: the before/after examples of pass docstrings, comparing two
graphs' interpretations, and small hand-built programs (MLP, softmax-cross-entropy, dropout)."""

from __future__ import annotations

import re
import textwrap
from types import ModuleType

import numpy as np

from dualflow.graph_ir import Graph, GraphBuilder, interpret, parse_graph
from dualflow.rule_check import same_bits

_EXAMPLE = re.compile(r"Before::\n(.*?)\nAfter::\n(.*?)(?:\n\S|\Z)", re.S)


def docstring_example(module: ModuleType) -> tuple[str, str]:
    """The (before, after) graph texts of a pass module's docstring example."""
    match = _EXAMPLE.search(module.__doc__ or "")
    assert match, f"{module.__name__} has no Before::/After:: example"
    return tuple(textwrap.dedent(part).strip() for part in match.groups())


def example_consts(text: str, seed: int = 0) -> dict[int, np.ndarray]:
    """Random constants in [0.5, 2) (so no two are equal) for every ``const`` of a graph text."""
    rng = np.random.default_rng(seed)
    graph = parse_graph(text)
    return {v.id: rng.uniform(0.5, 2.0, v.shape).astype(v.dtype) for v in graph.consts}


def random_args(graph: Graph, seed: int = 0) -> tuple[list, list]:
    """Random inputs and state for ``graph`` (uint64 keys for RNG state, labels for ints)."""
    rng = np.random.default_rng(seed)

    def make(v) -> np.ndarray:
        if v.dtype == "uint64":
            return rng.integers(0, 2**63, v.shape, dtype=np.uint64)
        if np.dtype(v.dtype).kind in "iu":
            return rng.integers(0, 2, v.shape).astype(v.dtype)
        return rng.uniform(-2, 2, v.shape).astype(v.dtype)

    return [make(v) for v in graph.inputs], [make(v) for v in graph.state]


def assert_same_run(before: Graph, after: Graph, inputs: list, state: list) -> None:
    """Both graphs give identical outputs, state and failed guards on the same arguments (the
    same bits: signed zeros too)."""
    want, got = interpret(before, inputs, state), interpret(after, inputs, state)
    assert len(got.outputs) == len(want.outputs)
    for g, w in zip(got.outputs + got.state, want.outputs + want.state):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_array_equal(g, w)
        assert same_bits(g, w), f"{g} vs {w} (signed zeros differ)"
    assert [n.loc for n in got.failed_guards] == [n.loc for n in want.failed_guards]


def mlp_step() -> Graph:
    """A 2-layer MLP forward + hand-written SGD update on w1, with a duplicated subexpression,
    a mul-by-one, a dead branch and a guard on the loss."""
    b = GraphBuilder("mlp")
    x = b.input((4, 3), "float32", "x")
    t = b.input((4,), "int64", "t")
    w1 = b.add_state((3, 5), "float32", "w1")
    w2 = b.add_state((5, 2), "float32", "w2")
    lr = b.const(np.float32(0.1), "lr")
    (h,) = b.node("matmul", [x, w1], loc="m.py:1")
    (h,) = b.node("relu", [h], loc="m.py:2")
    (h1,) = b.node("multiply", [h, 1.0], loc="m.py:3")
    (y,) = b.node("matmul", [h1, w2], loc="m.py:4")
    (y2,) = b.node("matmul", [h, w2], loc="m.py:5")  # the same as y once h1 => h
    (loss,) = b.node("softmax_cross_entropy", [y, t], {"ignore_label": -1, "reduce": "mean"})
    (_,) = b.node("exp", [y2], loc="m.py:7")  # dead
    (g,) = b.node("sum", [y2], {"axis": None, "keepdims": False})
    b.guard(g, 0.0, "float", "m.py:8")
    (step,) = b.node("multiply", [w1, lr], loc="m.py:9")
    (new_w1,) = b.node("subtract", [w1, step], loc="m.py:10")
    b.update(w1, new_w1)
    b.output(loss, y2)
    return b.build()


def dropout_graph() -> Graph:
    """Two identical dropout masks (never merged), one unused (never removed), a guard."""
    b = GraphBuilder("dropout")
    x = b.input((6,), "float32", "x")
    key = b.add_state((2,), "uint64", "key")
    attrs = {"shape": (6,), "ratio": 0.5, "dtype": "float32"}
    (m1,) = b.node("dropout_mask", [key], attrs, "d.py:1")
    (m2,) = b.node("dropout_mask", [key], attrs, "d.py:2")
    (_,) = b.node("dropout_mask", [key], attrs, "d.py:3")
    (y1,) = b.node("multiply", [x, m1])
    (y2,) = b.node("multiply", [x, m2])
    (s,) = b.node("sum", [y1], {"axis": None, "keepdims": False})
    b.guard(s, 1.0, "float", "d.py:4")
    b.guard(s, 1.0, "float", "d.py:4")
    (k,) = b.node("add", [key, np.uint64(0).item()])
    b.update(key, k)
    b.output(y1, y2)
    return b.build()


def softmax_xent() -> Graph:
    """Softmax cross-entropy written out (log-sum-exp with the max shift), with the shifted logits
    computed twice, a double negation, a reshape round trip and a constant one-hot divisor."""
    b = GraphBuilder("xent")
    x = b.input((4, 3), "float64", "logits")
    onehot = b.const(np.eye(3)[[0, 2, 1, 1]], "onehot")
    red = {"axis": 1, "keepdims": True}
    (m,) = b.node("max", [x], red, "x.py:1")
    (s,) = b.node("subtract", [x, m], loc="x.py:2")
    (e,) = b.node("exp", [s], loc="x.py:3")
    (z,) = b.node("sum", [e], red, "x.py:4")
    (lz,) = b.node("log", [z], loc="x.py:5")
    (s2,) = b.node("subtract", [x, m], loc="x.py:6")
    (lp,) = b.node("subtract", [s2, lz], loc="x.py:7")
    (flat,) = b.node("reshape", [lp], {"shape": (12,)}, "x.py:8")
    (back,) = b.node("reshape", [flat], {"shape": (4, 3)}, "x.py:9")
    (picked,) = b.node("multiply", [onehot, back], loc="x.py:10")
    (total,) = b.node("sum", [picked], {"axis": None, "keepdims": False}, "x.py:11")
    (neg,) = b.node("negative", [total], loc="x.py:12")
    (n,) = b.node("full", [], {"shape": (), "value": 4.0, "dtype": "float64"}, "x.py:13")
    (loss,) = b.node("divide", [neg, n], loc="x.py:14")
    (again,) = b.node("negative", [b.node("negative", [loss])[0]], loc="x.py:15")
    b.output(again)
    return b.build()
