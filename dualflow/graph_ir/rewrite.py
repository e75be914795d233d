"""What every pass needs to rewrite a graph: which nodes are effects, which values leave it, and
how to rewire uses, outputs and update sources when values are replaced.

Passes are ``Graph -> Graph`` functions in ``dualflow/passes/`` (one module each); these helpers
were in ``cse.py`` and ``dce.py`` and are shared by all of them.
"""

from __future__ import annotations

from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.ops.registry import OPS


def is_effectful(node: Node) -> bool:
    """Whether a node must never be removed, merged, folded or reordered: its op is ``impure``
    (RNG, state writes, collectives, guards).

    Example:
        >>> x = Value(0, (2,), "uint64")
        >>> is_effectful(Node("guard", (x,), (), {"kind": "item", "expect": 0}))
        True
    """
    op = OPS.get(node.op)
    return op is not None and op.impure


def escaping(graph: Graph) -> set[Value]:
    """The values that leave the graph: its outputs and the sources of its state updates.

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2,), "float32"); b.output(x)
        >>> escaping(b.build()) == {x}
        True
    """
    return set(graph.outputs) | {new for _, new in graph.updates}


def rewire(node: Node, subst: dict[Value, Value]) -> Node:
    """``node`` with its inputs replaced through ``subst`` (the same object when none changes).

    Example:
        >>> x, y = Value(0, (2,), "float32"), Value(1, (2,), "float32")
        >>> n = Node("exp", (x,), (Value(2, (2,), "float32"),))
        >>> rewire(n, {x: y}).inputs[0] is y, rewire(n, {}) is n
        (True, True)
    """
    if not any(isinstance(v, Value) and v in subst for v in node.inputs):
        return node
    inputs = tuple(subst.get(v, v) if isinstance(v, Value) else v for v in node.inputs)
    return Node(node.op, inputs, node.outputs, node.attrs, node.loc, node.recompute)


def rebuild(graph: Graph, nodes: list[Node], consts: dict, subst: dict[Value, Value]) -> Graph:
    """A copy of ``graph`` with new nodes/consts and outputs and update sources rewired.

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2,), "float32"); b.output(x)
        >>> g = b.build(); y = Value(5, (2,), "float32")
        >>> rebuild(g, [], {}, {x: y}).outputs[0] is y
        True
    """
    outputs = tuple(subst.get(v, v) for v in graph.outputs)
    updates = tuple((s, subst.get(n, n)) for s, n in graph.updates)
    return graph.replace(nodes=tuple(nodes), consts=consts, outputs=outputs, updates=updates)
