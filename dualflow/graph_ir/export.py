"""Export a graph for analysis and pictures: ``to_networkx`` (a DiGraph) and ``to_dot`` (text)."""

from __future__ import annotations

from typing import Any

from dualflow.graph_ir.ir import Graph, Value


def to_networkx(graph: Graph) -> Any:
    """A ``networkx.DiGraph`` with one vertex per value and per node, edges along data flow.

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2,), "float32"); b.output(*b.node("exp", [x]))
        >>> g = to_networkx(b.build()); g.number_of_nodes(), g.number_of_edges()
        (3, 2)
    """
    import networkx as nx  # noqa: PLC0415 - only analysis needs it

    dag = nx.DiGraph(name=graph.name)
    kinds = [("input", graph.inputs), ("state", graph.state), ("const", tuple(graph.consts))]
    for kind, values in kinds:
        for v in values:
            dag.add_node(f"%{v.id}", kind=kind, shape=v.shape, dtype=v.dtype, label=v.name)
    for i, node in enumerate(graph.nodes):
        key = f"n{i}:{node.op}"
        dag.add_node(key, kind="op", op=node.op, loc=node.loc)
        for v in node.value_inputs:
            dag.add_edge(f"%{v.id}", key)
        for v in node.outputs:
            dag.add_node(f"%{v.id}", kind="value", shape=v.shape, dtype=v.dtype)
            dag.add_edge(key, f"%{v.id}")
    return dag


def to_dot(graph: Graph) -> str:
    """Graphviz text: ops as boxes, values as ellipses labelled with their types.

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2,), "float32"); b.output(*b.node("exp", [x]))
        >>> to_dot(b.build()).splitlines()[0]
        'digraph "f" {'
    """

    def value_label(v: Value) -> str:
        name = f"{v.name}\\n" if v.name else ""
        return f'"%{v.id}" [label="{name}%{v.id} {v.dtype}{list(v.shape)}"];'

    lines = [f'digraph "{graph.name}" {{', "  rankdir=TB;"]
    for v in (*graph.inputs, *graph.state, *graph.consts):
        lines.append("  " + value_label(v))
    for i, node in enumerate(graph.nodes):
        lines.append(f'  "n{i}" [shape=box, label="{node.op}"];')
        lines.extend(f'  "%{v.id}" -> "n{i}";' for v in node.value_inputs)
        for v in node.outputs:
            lines.append("  " + value_label(v))
            lines.append(f'  "n{i}" -> "%{v.id}";')
    lines.append("}")
    return "\n".join(lines)
