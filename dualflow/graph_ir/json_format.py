"""A graph as JSON-ready data: the plan cache's format, faster to read than the text format.

The text format (``printer``/``parser``) is for people and round-trips exactly, but parsing runs
Python's ``ast`` on every node; this form loads with ``json`` alone. Attribute values are tagged
(``{"tuple": [...]}``) so every Python value the IR holds comes back with its own type.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.graph_ir.ir import Graph, Node, Value

_PLAIN = (bool, int, float, str, type(None))


def encode_attr(value: Any) -> Any:
    """One attribute value as JSON data; raises TypeError for a type the IR never holds.

    Example:
        >>> encode_attr((1, slice(None, 2, None), ...))
        {'tuple': [1, {'slice': [None, 2, None]}, {'ellipsis': True}]}
    """
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, tuple):
        return {"tuple": [encode_attr(v) for v in value]}
    if isinstance(value, list):
        return {"list": [encode_attr(v) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[encode_attr(k), encode_attr(v)] for k, v in value.items()]}
    if isinstance(value, slice):
        return {"slice": [encode_attr(p) for p in (value.start, value.stop, value.step)]}
    if value is Ellipsis:
        return {"ellipsis": True}
    if isinstance(value, np.ndarray | np.generic):
        array = np.asarray(value)
        return {"array": [array.tolist(), array.dtype.name, list(array.shape)]}
    raise TypeError(f"cannot store an attribute of type {type(value).__name__}: {value!r}")


def decode_attr(data: Any) -> Any:
    """Inverse of ``encode_attr``.

    Example:
        >>> decode_attr({"tuple": [1, {"ellipsis": True}]})
        (1, Ellipsis)
    """
    if not isinstance(data, dict):
        return data
    ((kind, body),) = data.items()
    if kind == "tuple":
        return tuple(decode_attr(v) for v in body)
    if kind == "list":
        return [decode_attr(v) for v in body]
    if kind == "dict":
        return {decode_attr(k): decode_attr(v) for k, v in body}
    if kind == "slice":
        return slice(*(decode_attr(v) for v in body))
    if kind == "ellipsis":
        return Ellipsis
    values, dtype, shape = body
    return np.array(values, dtype=dtype).reshape(shape)


def _decl(v: Value) -> list[Any]:
    return [v.id, list(v.shape), v.dtype, v.name]


def _operand(x: Any) -> Any:
    # a Value by id; a literal wrapped in a list so the two cannot be confused
    return x.id if isinstance(x, Value) else [x]


def graph_to_data(graph: Graph) -> dict[str, Any]:
    """The graph without its constant arrays (stored beside it, keyed by value id).

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2,), "float32")
        >>> b.output(*b.node("multiply", [x, 2.0]))
        >>> graph_to_data(b.build())["nodes"]
        [['multiply', [0, [2.0]], [[1, [2], 'float32', None]], {}, None]]
    """
    return {
        "name": graph.name,
        "inputs": [_decl(v) for v in graph.inputs],
        "state": [_decl(v) for v in graph.state],
        "consts": [_decl(v) for v in graph.consts],
        "nodes": [
            [
                n.op,
                [_operand(x) for x in n.inputs],
                [_decl(v) for v in n.outputs],
                {k: encode_attr(a) for k, a in n.attrs.items()},
                n.loc,
                *((True,) if n.recompute else ()),  # stored plans without it read as False
            ]
            for n in graph.nodes
        ],
        "outputs": [v.id for v in graph.outputs],
        "updates": [[s.id, v.id] for s, v in graph.updates],
    }


def graph_from_data(data: dict[str, Any], consts: dict[int, Any]) -> Graph:
    """Rebuild a graph from ``graph_to_data`` output and its constant arrays.

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2,), "float32"); b.output(*b.node("exp", [x]))
        >>> graph_from_data(graph_to_data(b.build()), {}).nodes[0].op
        'exp'
    """
    values: dict[int, Value] = {}

    def declare(record: list[Any]) -> Value:
        value = Value(record[0], tuple(record[1]), record[2], record[3])
        values[value.id] = value
        return value

    inputs = tuple(declare(r) for r in data["inputs"])
    state = tuple(declare(r) for r in data["state"])
    const_values = {declare(r): consts[r[0]] for r in data["consts"]}
    nodes = []
    for op, operands, outputs, attrs, loc, *recompute in data["nodes"]:
        ins = tuple(values[x] if isinstance(x, int) else x[0] for x in operands)
        outs = tuple(declare(r) for r in outputs)
        decoded = {k: decode_attr(a) for k, a in attrs.items()}
        nodes.append(Node(op, ins, outs, decoded, loc, recompute == [True]))
    return Graph(
        data["name"],
        inputs,
        state,
        const_values,
        tuple(nodes),
        tuple(values[i] for i in data["outputs"]),
        tuple((values[s], values[v]) for s, v in data["updates"]),
    )
