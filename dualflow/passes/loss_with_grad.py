"""A softmax cross entropy and its gradient from the same logits become one
``softmax_cross_entropy_and_grad``: each row's exponentials are made once, in one step.

A training step computes the loss forward and, in its backward, ``softmax_cross_entropy_grad``
of the same logits and labels; each op makes every row's exponentials and their sum (the grad a
second time). Where the gradient's ``gy`` is known when the loss runs (the backward's seed, a
constant, an argument, or steps that read none of the loss's results and have no effect, which
then move before it: the seed broadcast for ``loss.sum()``, a scale), the pass replaces the loss
by the merged op at the loss's place, which gives both values, and drops the gradient step. The
merged op computes both with the two ops' operations in their order (``ops.loss_with_grad``):
the pass preserves bits and runs in ``exact`` too. A recomputed node (a checkpoint's re-run) is
left as it is: its place in the schedule is the point.

Before::

    %3: float32[] = softmax_cross_entropy(%0, %1) {ignore_label=-1, reduce='mean'}
    ...
    %9: float32[64,10] = softmax_cross_entropy_grad(%0, %1, %2) {ignore_label=-1, reduce='mean'}

After::

    %3: float32[], %9: float32[64,10] = softmax_cross_entropy_and_grad(%0, %1, %2) {...}
"""

from __future__ import annotations

from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.graph_ir.rewrite import is_effectful

LOSS = "softmax_cross_entropy"
GRAD = "softmax_cross_entropy_grad"
MERGED = "softmax_cross_entropy_and_grad"


def _cone(graph: Graph, gy: object, at: int, index: dict[int, int]) -> list[Node] | None:
    """The nodes after index ``at`` that ``gy`` is made from, in schedule order (none: made
    before), or None where one of them reads the node at ``at`` or has an effect."""
    cone: dict[int, Node] = {}
    stack = [gy] if isinstance(gy, Value) else []
    while stack:
        producer = graph.producers.get(stack.pop())
        if producer is None or index[id(producer)] < at or id(producer) in cone:
            continue
        if index[id(producer)] == at or is_effectful(producer):
            return None
        cone[id(producer)] = producer
        stack.extend(producer.value_inputs)
    return sorted(cone.values(), key=lambda n: index[id(n)])


def _partner(
    graph: Graph, loss: Node, at: int, index: dict[int, int]
) -> tuple[Node, list[Node]] | None:
    """The first gradient node of ``loss``'s logits and labels (same attrs) whose ``gy`` can be
    made before ``loss`` (at index ``at``), with the nodes after the loss that make it."""
    x, t = loss.inputs
    for node in graph.users.get(x, ()) if isinstance(x, Value) else ():
        if node.op != GRAD or node.recompute or node.attrs != loss.attrs or index[id(node)] < at:
            continue  # (a gradient before the loss: its users may come before the loss too)
        if node.inputs[0] is not x or node.inputs[1] is not t:
            continue
        cone = _cone(graph, node.inputs[2], at, index)
        if cone is not None:
            return node, cone
    return None


def loss_with_grad(graph: Graph) -> Graph:
    """Merge each softmax cross entropy with its gradient node (``graph`` itself when none).

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f")
        >>> x, t = b.input((4, 3), "float32"), b.input((4,), "int64")
        >>> attrs = {"ignore_label": -1, "reduce": "mean"}
        >>> (loss,) = b.node("softmax_cross_entropy", [x, t], attrs)
        >>> (gx,) = b.node("softmax_cross_entropy_grad", [x, t, 1.0], attrs)
        >>> b.output(loss, gx)
        >>> [n.op for n in loss_with_grad(b.build()).nodes]
        ['softmax_cross_entropy_and_grad']
    """
    index = {id(node): i for i, node in enumerate(graph.nodes)}
    merged: dict[int, list[Node]] = {}  # a loss node's id -> the nodes in its place
    gone: set[int] = set()  # the gradient nodes merged and the nodes moved before a loss
    for i, node in enumerate(graph.nodes):
        if node.op != LOSS or node.recompute or len(node.inputs) != 2 or id(node) in gone:
            continue
        found = _partner(graph, node, i, index)
        if found is None or id(found[0]) in gone or any(id(n) in gone for n in found[1]):
            continue
        grad, cone = found
        outputs = (*node.outputs, *grad.outputs)
        pair = Node(MERGED, grad.inputs, outputs, dict(node.attrs), node.loc)
        merged[id(node)] = [*cone, pair]  # gy's own steps first, then both values
        gone.update({id(grad), *(id(n) for n in cone)})
    if not merged:
        return graph
    nodes = [m for n in graph.nodes if id(n) not in gone for m in merged.get(id(n), [n])]
    return graph.replace(nodes=tuple(nodes))
