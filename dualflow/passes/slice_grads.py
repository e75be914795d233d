"""Summed gradients of slices that tile one axis become one ``concat``.

The backward of a ``split`` (a packed q/k/v projection, ``chunk``, any getitems cutting one axis
into pieces) gives each piece's gradient as a ``getitem_grad``: an array of the whole input's
shape, zero outside the piece; the engine then adds them up (three zero-filled (L, N, 3E) arrays
and two full additions in a Transformer layer, ~5 ms of its step). Where the pieces tile the axis
this pass writes ``concat([g0 + 0.0, g1 + 0.0, ...], axis)`` instead. Every position of the sum
receives one piece's value and zeros, and adding +0.0 to a float in any order gives ``x + 0.0``
(-0.0 becomes +0.0, every other value, NaN and inf included, stays), so the result is eager's
bit for bit: the pass runs in ``exact`` too.

Before::

    %3: float32[4,6] = getitem_grad(%0) {index=((None, None, None), (0, 3, 1)), shape=(4, 6)}
    %4: float32[4,6] = getitem_grad(%1) {index=((None, None, None), (3, 6, 1)), shape=(4, 6)}
    %5: float32[4,6] = add(%3, %4)

After::

    %6: float32[4,3] = add(%0, 0.0)
    %7: float32[4,3] = add(%1, 0.0)
    %5: float32[4,6] = concat(%6, %7) {axis=1}
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.graph_ir.rewrite import escaping

_FULL = (None, None, None)


def _piece(node: Node) -> tuple[int, int, int] | None:
    """(axis, start, stop) of a ``getitem_grad`` that writes one step-1 slice of one axis."""
    shape, index = tuple(node.attrs["shape"]), node.attrs["index"]
    if len(index) != len(shape) or not all(type(i) is tuple and len(i) == 3 for i in index):
        return None
    cut = [axis for axis, item in enumerate(index) if item != _FULL]
    if len(cut) != 1 or index[cut[0]][2] not in (None, 1):
        return None
    axis, (start, stop, _) = cut[0], index[cut[0]]
    start, stop, _ = slice(start, stop).indices(shape[axis])
    return (axis, start, stop) if stop > start else None


class _Sums:
    """The add trees of one graph whose leaves are slice gradients tiling an axis."""

    def __init__(self, graph: Graph) -> None:
        self.producers = graph.producers
        self.users = graph.users
        self.escaping = escaping(graph)

    def _only_use(self, value: Value) -> Node | None:
        """The producer of ``value`` when its one use is the sum (so it can go)."""
        node = self.producers.get(value)
        if node is None or value in self.escaping or len(self.users.get(value, ())) != 1:
            return None
        return node

    def leaves(self, root: Node, inner: list[Node]) -> list[Value] | None:
        """The values an add tree sums (its inner adds appended to ``inner``), or None."""
        found = []
        for value in root.inputs:
            if not isinstance(value, Value) or value.shape != root.outputs[0].shape:
                return None  # a literal, or broadcasting
            node = self._only_use(value)
            if node is not None and node.op == "add":
                deeper = self.leaves(node, inner)
                if deeper is None:
                    return None
                inner.append(node)
                found += deeper
            else:
                found.append(value)
        return found

    def tiling(self, root: Node) -> tuple[int, list, list[Node]] | None:
        """(axis, [(start, gradient)], nodes to drop) when ``root`` sums slice gradients that
        tile one axis exactly, else None."""
        inner: list[Node] = []
        values = self.leaves(root, inner)
        if values is None or len(values) < 2 or np.dtype(root.outputs[0].dtype).kind != "f":
            return None
        pieces, axes, dropped = [], set(), [*inner]
        for value in values:
            node = self._only_use(value)
            if node is None or node.op != "getitem_grad" or value.dtype != root.outputs[0].dtype:
                return None
            piece = _piece(node)
            if piece is None:
                return None
            axes.add(piece[0])
            pieces.append((piece[1], piece[2], node.inputs[0]))
            dropped.append(node)
        pieces.sort(key=lambda p: p[0])
        (axis,) = axes if len(axes) == 1 else (None,)
        ends = [0] + [stop for _, stop, _ in pieces]
        if axis is None or [s for s, _, _ in pieces] != ends[:-1]:
            return None
        if ends[-1] != root.outputs[0].shape[axis]:
            return None
        return axis, [(start, g) for start, _, g in pieces], dropped


def slice_grads(graph: Graph) -> Graph:
    """Replace sums of slice gradients that tile an axis by one concat (bit-identical).

    Example:
        >>> from dualflow.graph_ir import GraphBuilder
        >>> b = GraphBuilder("f")
        >>> a, c = b.input((4, 3), "float32"), b.input((4, 3), "float32")
        >>> left = ((None, None, None), (0, 3, 1))
        >>> right = ((None, None, None), (3, 6, 1))
        >>> (ga,) = b.node("getitem_grad", [a], {"index": left, "shape": (4, 6)})
        >>> (gc,) = b.node("getitem_grad", [c], {"index": right, "shape": (4, 6)})
        >>> b.output(*b.node("add", [ga, gc]))
        >>> [n.op for n in slice_grads(b.build()).nodes]
        ['add', 'add', 'concat']
    """
    sums = _Sums(graph)
    plans: dict[Node, tuple[int, list]] = {}
    gone: set[Node] = set()
    for node in reversed(graph.nodes):  # the outermost add of a tree first
        if node.op != "add" or node in gone:
            continue
        found = sums.tiling(node)
        if found is not None:
            plans[node] = found[:2]
            gone.update(found[2])
    if not plans:
        return graph
    return graph.replace(nodes=tuple(_rewritten(graph, plans, gone)))


def _rewritten(graph: Graph, plans: dict[Node, tuple[int, list]], gone: set[Node]) -> list:
    ids = [v.id for v in (*graph.inputs, *graph.state, *graph.consts)]
    ids += [v.id for n in graph.nodes for v in n.outputs]
    next_id = max(ids, default=-1) + 1
    nodes: list[Node] = []
    for node in graph.nodes:
        if node in gone:
            continue
        if node not in plans:
            nodes.append(node)
            continue
        axis, pieces = plans[node]
        parts: list[Any] = []
        for _, gradient in pieces:
            part = Value(next_id, gradient.shape, gradient.dtype)
            next_id += 1
            nodes.append(Node("add", (gradient, 0.0), (part,), {}, node.loc, node.recompute))
            parts.append(part)
        concat = Node(
            "concat", tuple(parts), node.outputs, {"axis": axis}, node.loc, node.recompute
        )
        nodes.append(concat)
    return nodes
