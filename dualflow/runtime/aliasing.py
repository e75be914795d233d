"""Which values of a graph may share memory: an op's aliasing per call (``aliasing_of``) and,
for every node output, the outputs owning the memory it may be a view of (``alias_roots``).

The memory planner keeps an owner's buffer until the last read of any view of it, donation asks
which values may be views of a state array, and rematerialization which values own memory.
"""

from __future__ import annotations

from typing import Any

from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.ops.registry import OPS


def aliasing_of(op: Any, shapes: list[tuple[int, ...]], attrs: dict[str, Any]) -> str:
    """Whether ``op`` called on inputs of ``shapes`` returns new memory ("fresh"), a view of an
    input ("view") or either ("unknown"): its ``aliasing_rule``'s answer, else ``aliasing``.

    Example:
        >>> [aliasing_of(OPS["sum_to"], [(4, 3)], {"shape": s}) for s in ((3,), (4, 3))]
        ['fresh', 'view']
    """
    rule = op.aliasing_rule
    return op.aliasing if rule is None else rule(shapes, attrs)


def _kind(node: Node) -> str:
    """The op's aliasing for this node (``aliasing_of``; "unknown" for an op not registered)."""
    op = OPS.get(node.op)
    return (
        "unknown"
        if op is None
        else aliasing_of(op, [v.shape for v in node.value_inputs], node.attrs)
    )


def alias_roots(graph: Graph, with_state: bool = False) -> dict[Value, frozenset[Value]]:
    """Node output -> the node outputs owning memory it may share (itself if it owns some).

    Ops of unknown ``aliasing`` are assumed to both allocate and alias their inputs (safe side).
    ``with_state`` also counts each state value as the owner of its own memory (donation asks
    which values may be views of a state array).

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2, 3), "float32")
        >>> (y,) = b.node("exp", [x]); (t,) = b.node("transpose", [y], {"axes": (1, 0)})
        >>> alias_roots(b.build())[t] == {y}
        True
    """
    roots: dict[Value, frozenset[Value]] = (
        {s: frozenset({s}) for s in graph.state} if with_state else {}
    )
    for node in graph.nodes:
        kind = _kind(node)
        inherited = frozenset().union(*(roots.get(v, frozenset()) for v in node.value_inputs))
        for out in node.outputs:
            if kind == "fresh":
                roots[out] = frozenset({out})
            else:
                roots[out] = inherited if kind == "view" else inherited | {out}
    return roots
