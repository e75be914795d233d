"""Every pass is idempotent (a second run returns the identical object), never removes, merges
or folds impure nodes and guards, and keeps updates."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from dualflow.graph_ir import Graph, GraphBuilder, verify
from dualflow.passes import PASSES, run_passes
from dualflow.passes.dce import is_effectful
from tests.graph_ir.graphs import everything, everything_inputs
from tests.passes.programs import (
    assert_same_run,
    dropout_graph,
    mlp_step,
    random_args,
    softmax_xent,
)

PROGRAMS = [mlp_step, softmax_xent, dropout_graph, everything]
NAMES = ["dce", "cse", "fold"]


def _effects(graph: Graph) -> Counter:
    return Counter(
        (n.op, n.loc, tuple(sorted(n.attrs.items()))) for n in graph.nodes if is_effectful(n)
    )


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("build", PROGRAMS, ids=lambda f: f.__name__)
def test_idempotent(name: str, build) -> None:
    once = verify(PASSES[name](build()))
    assert PASSES[name](once) is once


@pytest.mark.parametrize("name", NAMES)
def test_unchanged_graph_is_returned_as_is(name: str) -> None:
    b = GraphBuilder("plain")
    x = b.input((3,), "float32", "x")
    b.output(*b.node("exp", [x]))
    graph = b.build()
    assert PASSES[name](graph) is graph


@pytest.mark.parametrize("passes", ["O1", "O2", ("dce",), ("cse",), ("fold",)])
@pytest.mark.parametrize("build", PROGRAMS, ids=lambda f: f.__name__)
def test_effects_and_updates_survive(passes, build) -> None:
    graph = build()
    out, _ = run_passes(graph, passes, verify_each=True)
    assert _effects(out) == _effects(graph)
    assert [s for s, _ in out.updates] == [s for s, _ in graph.updates]
    inputs, state = everything_inputs() if build is everything else random_args(graph)
    assert_same_run(graph, out, inputs, state)


def test_dropout_masks_are_neither_merged_nor_removed() -> None:
    out, _ = run_passes(dropout_graph(), "O2", verify_each=True)
    assert [n.loc for n in out.nodes if n.op == "dropout_mask"] == ["d.py:1", "d.py:2", "d.py:3"]
    assert len(out.guards) == 2


def test_constant_inputs_of_impure_nodes_are_not_folded() -> None:
    b = GraphBuilder("rng")
    key = b.const(np.array([1, 2], np.uint64), "key")
    (u,) = b.node(
        "random_uniform", [key], {"shape": (3,), "low": 0.0, "high": 1.0, "dtype": "float64"}
    )
    b.output(u)
    graph = b.build()
    assert PASSES["fold"](graph) is graph


def test_dce_keeps_update_sources_and_drops_unused_constants() -> None:
    b = GraphBuilder("upd")
    w = b.add_state((2,), "float64", "w")
    c = b.const(np.ones(2), "unused")
    d = b.const(np.full(2, 3.0), "used")
    (_,) = b.node("add", [w, c])
    (new,) = b.node("add", [w, d])
    b.update(w, new)
    out = PASSES["dce"](b.build())
    assert [v.name for v in out.consts] == ["used"]
    assert out.updates == ((w, new),)


def test_cse_rewires_update_sources_and_outputs() -> None:
    b = GraphBuilder("upd")
    x = b.input((2,), "float64", "x")
    w = b.add_state((2,), "float64", "w")
    (a,) = b.node("add", [w, x])
    (a2,) = b.node("add", [x, w])
    b.update(w, a2)
    b.output(a2, a)
    out = PASSES["cse"](b.build())
    assert len(out.nodes) == 1 and out.updates == ((w, a),) and out.outputs == (a, a)
