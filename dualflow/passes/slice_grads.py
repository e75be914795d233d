"""Summed gradients of slices that tile one axis become one ``sum_slice_grads``.

The backward of a ``split`` (a packed q/k/v projection, ``chunk``, any getitems cutting one axis
into pieces) gives each piece's gradient as a ``getitem_grad``: an array of the whole input's
shape, zero outside the piece; the engine then adds them up (three zero-filled (L, N, 3E) arrays
and two full additions in a Transformer layer, ~5 ms of its step). Where the pieces tile the axis
this pass writes ``sum_slice_grads([g0, g1, ...], axis)`` instead: each piece plus 0.0, joined
along the axis. Every position of the sum receives one piece's value and zeros, and adding +0.0
to a float in any order gives ``x + 0.0`` (-0.0 becomes +0.0, every other value, NaN and inf
included, stays), so the result is eager's bit for bit: the pass runs in ``exact`` too. A piece
whose gradient is a reshape used only here (attention's head-split gradient, a strided view
reshaped) is given to the op before the reshape: it reads the view instead of a copy.

Before::

    %2: float32[4,3] = reshape(%1) {shape=(4, 3)}
    %3: float32[4,6] = getitem_grad(%0) {index=((None, None, None), (0, 3, 1)), shape=(4, 6)}
    %4: float32[4,6] = getitem_grad(%2) {index=((None, None, None), (3, 6, 1)), shape=(4, 6)}
    %5: float32[4,6] = add(%3, %4)

After::

    %5: float32[4,6] = sum_slice_grads(%0, %1) {axis=1, shapes=((4, 3), (4, 3))}
"""

from __future__ import annotations

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
        sources = [self.source(g) for _, _, g in pieces]
        dropped += [reshape for _, reshape in sources if reshape is not None]
        shapes = [g.shape for _, _, g in pieces]
        return axis, [(v, shape) for (v, _), shape in zip(sources, shapes)], dropped

    def source(self, gradient: Value) -> tuple[Value, Node | None]:
        """(the value a piece is read from, the reshape node that then goes): the input of a
        reshape whose one use is this piece's slice gradient (the op reads it through a view
        instead of copying it), else the gradient itself."""
        node = self._only_use(gradient)
        if node is None or node.op != "reshape" or not isinstance(node.inputs[0], Value):
            return gradient, None
        shapes = (*node.inputs[0].shape, *gradient.shape)
        if not all(type(d) is int for d in shapes) or node.inputs[0].dtype != gradient.dtype:
            return gradient, None  # sizes as expressions (a template): kept as they are
        return node.inputs[0], node


def slice_grads(graph: Graph) -> Graph:
    """Replace sums of slice gradients that tile an axis by one ``sum_slice_grads``
    (bit-identical).

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
        ['sum_slice_grads']
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
    nodes: list[Node] = []
    for node in graph.nodes:
        if node in gone:
            continue
        if node not in plans:
            nodes.append(node)
            continue
        axis, pieces = plans[node]
        attrs = {"axis": axis, "shapes": tuple(tuple(shape) for _, shape in pieces)}
        sources = tuple(source for source, _ in pieces)
        nodes.append(
            Node("sum_slice_grads", sources, node.outputs, attrs, node.loc, node.recompute)
        )
    return nodes
