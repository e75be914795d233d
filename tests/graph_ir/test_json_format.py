"""The JSON form of a graph (the plan cache's format) round-trips exactly, through real JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest

import dualflow
from dualflow.graph_ir import print_graph
from dualflow.graph_ir.json_format import decode_attr, encode_attr, graph_from_data, graph_to_data
from tests.graph_ir.graphs import chain, everything


def _round_trip(graph):
    data = json.loads(json.dumps(graph_to_data(graph)))
    consts = {v.id: a for v, a in graph.consts.items()}
    return graph_from_data(data, consts)


@pytest.mark.parametrize("graph", [everything(), chain(5, 8)], ids=["everything", "chain"])
def test_hand_built_graphs_round_trip(graph) -> None:
    back = _round_trip(graph)
    assert print_graph(back) == print_graph(graph)
    assert [n.attrs for n in back.nodes] == [n.attrs for n in graph.nodes]


def test_an_optimized_training_step_round_trips() -> None:
    model = dualflow.nn.Sequential(dualflow.nn.Linear(3, 4), dualflow.nn.Tanh())
    opt = dualflow.optim.Adam(model.params(), lr=0.1)

    @dualflow.compile
    def step(x):
        opt.zero_grad()
        loss = (model(x)[1:, ::2] ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    x = dualflow.tensor(np.ones((2, 3), np.float32))
    for _ in range(2):
        step(x)
    graph = step.history[-1].graph
    assert print_graph(_round_trip(graph)) == print_graph(graph)


def test_fused_kernel_attributes_round_trip() -> None:
    f = dualflow.compile(lambda x: ((x * 2 + 1).tanh() * x - 3).sum())
    f(dualflow.tensor(np.ones(5000, np.float32)))  # above the fusion size threshold
    graph = f.history[-1].graph
    fused = [n for n in graph.nodes if n.op == "fused"]
    assert fused, print_graph(graph)
    back = _round_trip(graph)
    assert [n.attrs for n in back.nodes if n.op == "fused"] == [n.attrs for n in fused]


@pytest.mark.parametrize(
    "value",
    [
        (1, -2.5, None, True, "s"),
        [slice(1, None, -1), Ellipsis],
        {"k": (1,)},
        float("inf"),
        np.arange(6, dtype=np.int32).reshape(2, 3),
    ],
)
def test_attribute_values_keep_their_types(value) -> None:
    back = decode_attr(json.loads(json.dumps(encode_attr(value))))
    if isinstance(value, np.ndarray):
        assert back.dtype == value.dtype and np.array_equal(back, value)
    else:
        assert back == value and type(back) is type(value)


def test_unknown_attribute_types_are_refused() -> None:
    with pytest.raises(TypeError, match="cannot store an attribute of type object"):
        encode_attr(object())
