"""The canonical text format: print -> parse -> print is the identity for hand-built graphs with
every kind of attribute, literal, multi-output node, guard, update and constant; errors name lines.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dualflow.graph_ir import (
    Graph,
    GraphBuilder,
    GraphParseError,
    Node,
    Value,
    format_literal,
    parse_graph,
    parse_literal,
    print_graph,
    verify,
)
from tests.graph_ir.graphs import everything

LITERALS = [
    0,
    -3,
    2**70,
    1.5,
    -0.0,
    1e-300,
    -1e300,
    float("inf"),
    float("-inf"),
    True,
    None,
    "",
    "mean",
    'it\'s "quoted"\n',
    (),
    (1,),
    (1, -2, None),
    ((1, None, None), None, (None, None, -1)),
    [1, (2.5, "a")],
    slice(None, 2, None),
    slice(-1, None, -2),
    Ellipsis,
    (Ellipsis, slice(1, 3, None), 0),
]


@pytest.mark.parametrize("value", LITERALS, ids=repr)
def test_literals_round_trip(value: object) -> None:
    text = format_literal(value)
    back = parse_literal(text)
    assert back == value and type(back) is type(value)
    assert format_literal(back) == text


def test_nan_and_arrays_round_trip() -> None:
    assert math.isnan(parse_literal(format_literal(float("nan"))))
    for array in (np.array([[1, 2], [3, 4]]), np.array([True, False]), np.array(2.5)):
        back = parse_literal(format_literal(array))
        np.testing.assert_array_equal(back, array)
        assert back.dtype == array.dtype and back.shape == array.shape


def test_empty_array_attr_keeps_its_shape() -> None:
    array = np.zeros((0, 3), np.int64)
    assert parse_literal(format_literal(array)).shape == (0, 3)


def test_non_plain_data_is_refused() -> None:
    for value in (lambda: 0, object(), {"a": 1}, {1, 2}):
        with pytest.raises(TypeError, match="not plain data"):
            format_literal(value)


def _round_trip(graph: Graph) -> Graph:
    text = print_graph(graph)
    parsed = parse_graph(text, {v.id: a for v, a in graph.consts.items()})
    assert print_graph(parsed) == text
    return parsed


def test_hand_built_graph_round_trips_with_structure() -> None:
    graph = everything()
    parsed = _round_trip(graph)
    verify(parsed)
    assert [v.id for v in parsed.inputs] == [0, 1]
    assert [(v.name, v.shape, v.dtype) for v in parsed.state] == [("w", (4,), "float64")]
    (const,) = parsed.consts
    np.testing.assert_array_equal(parsed.consts[const], graph.consts[next(iter(graph.consts))])
    assert [n.op for n in parsed.nodes] == [n.op for n in graph.nodes]
    for a, b in zip(parsed.nodes, graph.nodes):
        assert a.attrs == b.attrs and a.loc == b.loc
        assert [getattr(v, "id", v) for v in a.inputs] == [getattr(v, "id", v) for v in b.inputs]
        assert [(v.id, v.shape, v.dtype) for v in a.outputs] == [
            (v.id, v.shape, v.dtype) for v in b.outputs
        ]
    (guard,) = parsed.guards
    assert guard.attrs == {"expect": 4.0, "kind": "float"} and guard.loc == "m.py:9"
    assert len(parsed.nodes[7].outputs) == 3  # batch_norm
    assert [(s.id, n.id) for s, n in parsed.updates] == [(2, 16)]
    assert parsed.nodes[-2].inputs[1] == -2.5  # a negative literal input


def test_raw_nodes_with_unusual_attrs_round_trip() -> None:
    x = Value(0, (3,), "float32", "x")
    y, z = Value(1, (3,), "float32"), Value(2, (), "int64", "count")
    attrs = {
        "index": (slice(None, None, -1), Ellipsis, None),
        "limits": (float("-inf"), float("inf")),
        "names": ["a", "b c"],
        "flag": False,
        "table": np.array([[1, 0], [0, 1]], np.int8),
    }
    nodes = (
        Node("custom", (x, 1, -2.0, True), (y, z), attrs, "file name.py:12"),
        Node("guard", (z,), (), {"expect": 3, "kind": "int"}),
    )
    graph = Graph("raw", (x,), (), {}, nodes, (y, z, x))
    parsed = _round_trip(graph)
    np.testing.assert_array_equal(parsed.nodes[0].attrs["table"], attrs["table"])
    assert parsed.nodes[0].inputs[1:] == (1, -2.0, True)
    assert parsed.nodes[0].loc == "file name.py:12"


def test_empty_graph_and_graph_without_outputs_round_trip() -> None:
    b = GraphBuilder("empty")
    b.input((), "float32")
    _round_trip(b.build())
    b = GraphBuilder("state_only")
    s = b.add_state((2,), "float32", "s")
    (n,) = b.node("multiply", [s, 2.0])
    b.update(s, n)
    _round_trip(b.build())


def test_string_attr_with_comment_marker() -> None:
    x, y = Value(0, (2,), "float32"), Value(1, (2,), "float32")
    graph = Graph("s", (x,), (), {}, (Node("custom", (x,), (y,), {"note": "a  # b"}),), (y,))
    _round_trip(graph)


def test_value_name_with_a_double_quote() -> None:
    x = Value(0, (2,), "float32", "batch['a\"b']")
    _round_trip(Graph("q", (x,), (), {}, (), (x,)))


BAD_TEXTS = [
    ("graph f(%0: float32[2]) {\n  return %0", 1),  # no closing brace
    ("graf f(%0: float32[2]) {\n  return %0\n}", 1),
    ("graph f(%0: float32[2]) {\n  %1: float32[2] = exp(%0\n  return %1\n}", 2),
    (
        "graph f(%0: float32[2]) {\n  %1: float32[2] = exp(%0)\n  %2: float32[2] = exp(%7)\n"
        "  return %2\n}",
        3,
    ),
    ("graph f(%0: float32[2]) {\n  %1: float32[2] = exp(%0) {axis=}\n  return %1\n}", 2),
    ("graph f(%0: float32[2]) {\n  %1: float32[2] = exp(%0) trailing\n  return %1\n}", 2),
    ("graph f(%0: float32[2]) {\n  %1: float32[2] = exp(%0)\n  return %1\n  update %1 %0\n}", 4),
    ("graph f(%0: float32[2]) {\n  %1: float32[2] = exp(%0)\n  return %5\n}", 3),
    ("graph f(%0: float32[2]) {\n  %1: float32[2] = exp(open('x'))\n  return %1\n}", 2),
]


@pytest.mark.parametrize("text,line", BAD_TEXTS)
def test_parse_errors_name_the_line(text: str, line: int) -> None:
    with pytest.raises(GraphParseError, match=rf"line {line}\b"):
        parse_graph(text)
