"""Common-subexpression elimination: merge pure nodes with the same op, inputs (sorted for
``add`` and ``multiply``, whose IEEE results do not depend on the operand order) and attrs, and
equal constants (same bytes and memory layout); uses, outputs and update sources are rewired.
Recompute nodes (``Node.recompute``: rematerialized values, checkpointed segments' re-runs)
are never merged, with the forward or each other. Every merge preserves bits:
``maximum``/``minimum`` are commutative ops but keep their operand order here, since numpy's
``maximum(0.0, -0.0)`` is ``-0.0`` and ``maximum(-0.0, 0.0)`` is ``0.0``.
In the example both constants hold the same bytes (a parsed graph's constants are zeros).

Before::

    graph f(%0: float32[4] "x", %1: float32[4] "y") {
      const %2: float32[4]
      const %3: float32[4]
      %4: float32[4] = multiply(%0, %1)  # m.py:1
      %5: float32[4] = multiply(%1, %0)  # m.py:2
      %6: float32[4] = add(%4, %2)  # m.py:3
      %7: float32[4] = add(%5, %3)  # m.py:4
      return %6, %7
    }

After::

    graph f(%0: float32[4] "x", %1: float32[4] "y") {
      const %2: float32[4]
      %4: float32[4] = multiply(%0, %1)  # m.py:1
      %6: float32[4] = add(%4, %2)  # m.py:3
      return %6, %6
    }
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.graph_ir.rewrite import is_effectful, rebuild, rewire
from dualflow.ops.registry import OPS


def attr_key(value: Any) -> Any:
    """A hashable canonical key of an attribute or literal: equal keys mean equal values.

    Types are part of the key (``1``, ``1.0`` and ``True`` differ); arrays compare by dtype,
    shape and bytes; floats by ``repr`` so that NaN equals NaN and ``-0.0`` differs from ``0.0``.

    Example:
        >>> attr_key((1, 2.0)) == attr_key((1, 2.0)), attr_key(1) == attr_key(1.0)
        (True, False)
    """
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.name, value.shape, value.tobytes())
    if isinstance(value, np.generic):
        return attr_key(value.item())
    if isinstance(value, tuple | list):
        return (type(value).__name__, tuple(attr_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, attr_key(v)) for k, v in value.items())))
    if isinstance(value, slice):
        return ("slice", attr_key(value.start), attr_key(value.stop), attr_key(value.step))
    if isinstance(value, float):
        return ("float", repr(value))
    return (type(value).__name__, repr(value))


def _operand_key(value: Value | Any) -> tuple:
    # Values by identity (their id is unique in a graph); literals by type and repr.
    return (0, value.id, "") if isinstance(value, Value) else (1, *attr_key(value))


def node_key(node: Node) -> tuple:
    """The key under which two pure nodes compute the same thing.

    Example:
        >>> x, y = Value(0, (2,), "float32"), Value(1, (2,), "float32")
        >>> out = (Value(2, (2,), "float32"),)
        >>> node_key(Node("add", (x, y), out)) == node_key(Node("add", (y, x), out))
        True
    """
    operands = [_operand_key(v) for v in node.inputs]
    op = OPS.get(node.op)
    if op is not None and op.commutative:  # the same bits in either order (NaN payloads aside)
        operands.sort()
    outputs = tuple((v.shape, v.dtype) for v in node.outputs)
    attrs = tuple(sorted((k, attr_key(v)) for k, v in node.attrs.items()))
    return (node.op, tuple(operands), attrs, outputs)


def _merge_consts(graph: Graph) -> tuple[dict[Value, np.ndarray], dict[Value, Value]]:
    kept: dict[Value, np.ndarray] = {}
    first: dict[tuple, Value] = {}
    subst: dict[Value, Value] = {}
    for value, array in graph.consts.items():
        array = np.asarray(array)  # a C and an F constant differ: later reductions see the order
        key = (attr_key(array), array.strides)
        if key in first:
            subst[value] = first[key]
        else:
            first[key] = value
            kept[value] = array
    return kept, subst


def cse(graph: Graph) -> Graph:
    """Merge duplicate pure nodes and equal constants; returns ``graph`` when none are found.

    Example:
        >>> from dualflow.graph_ir import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2,), "float32")
        >>> (a,), (c,) = b.node("exp", [x]), b.node("exp", [x]); b.output(a, c)
        >>> g = cse(b.build()); len(g.nodes), g.outputs[0] is g.outputs[1], cse(g) is g
        (1, True, True)
    """
    consts, subst = _merge_consts(graph)
    seen: dict[tuple, Node] = {}
    nodes: list[Node] = []
    for original in graph.nodes:
        node = rewire(original, subst)
        # a recompute node repeats a forward value on purpose (to free it early): never merged
        if not is_effectful(node) and not node.recompute:
            key = node_key(node)
            twin = seen.get(key)
            if twin is not None:
                subst.update(zip(node.outputs, twin.outputs))
                continue
            seen[key] = node
        nodes.append(node)
    if not subst:
        return graph
    return rebuild(graph, nodes, consts, subst)
