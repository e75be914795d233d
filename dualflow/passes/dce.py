"""Dead-code elimination: drop nodes whose outputs reach no graph output or update, and unused
constants; impure nodes (RNG, state writes, collectives) and guards are roots, never removed.

Before::

    graph f(%0: float32[4] "x") {
      state %1: uint64[2] "key"
      const %2: float32[4]
      %3: float32[4] = exp(%0)  # m.py:1
      %4: float32[4] = dropout_mask(%1) {dtype='float32', ratio=0.5, shape=(4,)}  # m.py:2
      %5: float32[4] = tanh(%0)  # m.py:3
      %6: float32[4] = multiply(%5, %2)  # m.py:4
      return %3
    }

After::

    graph f(%0: float32[4] "x") {
      state %1: uint64[2] "key"
      %3: float32[4] = exp(%0)  # m.py:1
      %4: float32[4] = dropout_mask(%1) {dtype='float32', ratio=0.5, shape=(4,)}  # m.py:2
      return %3
    }
"""

from __future__ import annotations

from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.graph_ir.rewrite import escaping, is_effectful


def dce(graph: Graph) -> Graph:
    """Remove dead nodes and unused constants; returns ``graph`` itself when nothing is dead.

    Example:
        >>> from dualflow.graph_ir import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2,), "float32")
        >>> _ = b.node("exp", [x]); b.output(x)
        >>> d = dce(b.build()); len(d.nodes), dce(d) is d
        (0, True)
    """
    live: set[Value] = escaping(graph)
    kept: list[Node] = []
    for node in reversed(graph.nodes):
        if is_effectful(node) or any(v in live for v in node.outputs):
            kept.append(node)
            live.update(node.value_inputs)
    consts = {v: a for v, a in graph.consts.items() if v in live}
    if len(kept) == len(graph.nodes) and len(consts) == len(graph.consts):
        return graph
    return graph.replace(nodes=tuple(reversed(kept)), consts=consts)
