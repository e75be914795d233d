"""``print_graph``: the canonical text form of a Graph (one line per node, typed, located).

``parse_graph`` reads exactly this format back; print -> parse -> print is the identity. Attribute
values are written as Python-like literals (tuples, slices, ``...``, ``array([...], 'int64')``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dualflow.graph_ir.ir import Graph, Node, Value


def format_decl(v: Value) -> str:
    """``%3: float32[2,4] "name"`` — a value with its type (and name when it has one).

    Example:
        >>> format_decl(Value(3, (2, 4), "float32"))
        '%3: float32[2,4]'
    """
    return repr(v)


def format_literal(value: Any) -> str:
    """Render an attribute or literal input so that ``parse_literal`` gives it back.

    Example:
        >>> format_literal((1, slice(None, 2, None), None, float("inf")))
        '(1, slice(None, 2, None), None, inf)'
    """
    if isinstance(value, bool) or value is None or isinstance(value, str | int):
        return repr(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)  # inf/-inf repr as names already
    if isinstance(value, tuple):
        inner = ", ".join(format_literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(format_literal(v) for v in value) + "]"
    if isinstance(value, slice):
        return (
            f"slice({format_literal(value.start)}, {format_literal(value.stop)}, "
            f"{format_literal(value.step)})"
        )
    if value is Ellipsis:
        return "..."
    if isinstance(value, np.ndarray):
        if value.size == 0:  # an empty list would lose the shape
            return f"array([], {value.dtype.name!r}, {format_literal(value.shape)})"
        return f"array({format_literal(value.tolist())}, {value.dtype.name!r})"
    if isinstance(value, np.generic):
        return format_literal(value.item())
    raise TypeError(f"attribute value {value!r} of type {type(value).__name__} is not plain data")


def _operand(value: Value | Any) -> str:
    return f"%{value.id}" if isinstance(value, Value) else format_literal(value)


def format_node(node: Node) -> str:
    """One node as a line: ``outs = op(args) {attrs}  # loc`` (``outs = recompute op(...)``
    for a recompute node).

    Example:
        >>> x, y = Value(0, (2,), "float32"), Value(1, (2,), "float32")
        >>> format_node(Node("multiply", (x, 2.0), (y,), {}, "t.py:3"))
        '%1: float32[2] = multiply(%0, 2.0)  # t.py:3'
    """
    text = ", ".join(format_decl(v) for v in node.outputs)
    text = f"{text} = " if text else ""
    text += "recompute " if node.recompute else ""
    text += f"{node.op}({', '.join(_operand(v) for v in node.inputs)})"
    if node.attrs:
        attrs = ", ".join(f"{k}={format_literal(v)}" for k, v in sorted(node.attrs.items()))
        text += " {" + attrs + "}"
    if node.loc:
        text += f"  # {node.loc}"
    return text


def print_graph(graph: Graph) -> str:
    """The whole graph in the canonical text format.

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2,), "float32", "x")
        >>> b.output(*b.node("exp", [x])); print(print_graph(b.build()))
        graph f(%0: float32[2] "x") {
          %1: float32[2] = exp(%0)
          return %1
        }
    """
    lines = [f"graph {graph.name}({', '.join(format_decl(v) for v in graph.inputs)}) {{"]
    if graph.state:
        lines.append(f"  state {', '.join(format_decl(v) for v in graph.state)}")
    for value in graph.consts:
        lines.append(f"  const {format_decl(value)}")
    lines.extend(f"  {format_node(n)}" for n in graph.nodes)
    lines.append(f"  return {', '.join(f'%{v.id}' for v in graph.outputs)}".rstrip())
    lines.extend(f"  update %{s.id} <- %{n.id}" for s, n in graph.updates)
    lines.append("}")
    return "\n".join(lines)
