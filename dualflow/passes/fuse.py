"""fuse: regions of elementwise nodes whose intermediates stay inside become one ``fused`` node.

Before: ``%1 = multiply(%0, 0.5)  # m.py:1`` then ``%2 = tanh(%1)  # m.py:2``; after: ``%2 =
fused(%0) {args=('a0',), dtype='float32', expr=('call', 'tanh', ('call', 'multiply', ('var',
'a0'), ('const', 0.5))), locs=('m.py:1', 'm.py:2')}  # m.py:1``. A full ``sum`` reading a region
joins it: the fused node gets ``reduce='sum'`` and ``keepdims`` and outputs the sum's value.
Whether a region is worth fusing is the cost model of the device's backend
(``kernels.backend.FusionCost``).
"""

from __future__ import annotations

import heapq

import numpy as np

from dualflow.device import Device
from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.graph_ir.rewrite import escaping
from dualflow.kernels.backend import CPU_FUSION, FusionCost, backend_of
from dualflow.kernels.expr.expression import Expr
from dualflow.ops.registry import OPS
from dualflow.ops.synthetic import FUSED, FUSED_REDUCTIONS

MIN_FUSE_SIZE = CPU_FUSION.min_size  # the CPU's: below it, small regions fuse only as one loop
# Reductions a region may end in (over all axes only): the kernels accumulate the elements as they
# are computed, so the elementwise intermediate is never materialized.
REDUCTIONS = FUSED_REDUCTIONS
# Shared subexpressions are duplicated in the composed tree; cap its size so diamonds of diamonds
# cannot grow it exponentially.
MAX_EXPR_NODES = 400


def fusible(node: Node) -> bool:
    """Whether ``node`` may join a fusion region: a pure, single-output elementwise op.

    Example:
        >>> from dualflow.graph_ir.ir import Value
        >>> fusible(Node("exp", (Value(0, (2,), "float32"),), (Value(1, (2,), "float32"),)))
        True
    """
    op = OPS.get(node.op)
    return (
        op is not None
        and op.kind == "elementwise"
        and not op.impure
        and op.expr is not None
        and len(node.outputs) == 1
    )


def _region(
    graph: Graph, root: int, taken: set[int], escaping: set[Value], index: dict[int, int]
) -> list[int]:
    """Grow the maximal region ending at node ``root``: producers are visited in decreasing
    schedule order, so when one is examined every in-region user it will ever have is known."""
    region = {root}
    heap: list[int] = []

    def push_producers(i: int) -> None:
        for v in graph.nodes[i].value_inputs:
            producer = graph.producers.get(v)
            if producer is not None:
                heapq.heappush(heap, -index[id(producer)])

    push_producers(root)
    while heap:
        i = -heapq.heappop(heap)
        node = graph.nodes[i]
        if i in region or i in taken or not fusible(node):
            continue
        out = node.outputs[0]
        users = graph.users.get(out, ())
        # An intermediate needed outside (a user elsewhere, a graph output, an update source)
        # must stay materialized. This also rules out cycles: only the root's value leaves the
        # region, and every member is an ancestor of the root.
        if out in escaping or any(index[id(u)] not in region for u in users):
            continue
        region.add(i)
        push_producers(i)
    return sorted(region)


def _compose(graph: Graph, members: list[int]) -> tuple[Expr, tuple[Value, ...]]:
    """The root's expression with every member's expression substituted in, over new names."""
    inside = {graph.nodes[i].outputs[0]: graph.nodes[i] for i in members}
    inputs: list[Value] = []
    memo: dict[Value, Expr] = {}

    def operand(v: Value | int | float | bool) -> Expr:
        if not isinstance(v, Value):
            return ("const", v)  # a literal input stays a weak Python scalar
        if v in memo:
            return memo[v]
        if v in inside:
            memo[v] = node_expr(inside[v])
        else:
            if v not in inputs:
                inputs.append(v)
            memo[v] = ("var", f"a{inputs.index(v)}")
        return memo[v]

    def node_expr(node: Node) -> Expr:
        op = OPS[node.op]
        bound = {name: operand(v) for name, v in zip(op.args, node.inputs)}
        return substitute(op.expr, bound, node.attrs)

    return node_expr(graph.nodes[members[-1]]), tuple(inputs)


def substitute(expr: Expr, bound: dict[str, Expr], attrs: dict) -> Expr:
    """Replace ``var`` leaves by ``bound`` expressions and ``attr`` leaves by constants.

    Example:
        >>> substitute(("call", "add", ("var", "x"), ("attr", "k")), {"x": ("var", "a0")}, {"k": 2})
        ('call', 'add', ('var', 'a0'), ('const', 2))
    """
    kind = expr[0]
    if kind == "var":
        return bound[expr[1]]
    if kind == "attr":
        return ("const", attrs[expr[1]])
    if kind == "const":
        return expr
    return ("call", expr[1], *(substitute(e, bound, attrs) for e in expr[2:]))


def expr_size(expr: Expr) -> int:
    """Number of leaves and calls in an expression tree.

    Example:
        >>> expr_size(("call", "exp", ("var", "a0")))
        2
    """
    return 1 + sum(expr_size(e) for e in expr[2:]) if expr[0] == "call" else 1


def expr_calls(expr: Expr) -> int:
    """Number of function calls in an expression tree (the ufunc calls numpy makes for it).

    Example:
        >>> expr_calls(("call", "add", ("call", "exp", ("var", "a0")), ("const", 1)))
        2
    """
    return 1 + sum(expr_calls(e) for e in expr[2:]) if expr[0] == "call" else 0


def _full_size_calls(graph: Graph, members: list[int]) -> int:
    """The ufunc calls numpy makes over the region's full output size: its members' calls,
    counting only members as big as the root (smaller ones, e.g. a bias computed from
    parameters, are cheap in numpy and would be recomputed per element in one loop)."""
    size = _numel(graph.nodes[members[-1]].outputs[0])
    return sum(
        expr_calls(OPS[graph.nodes[i].op].expr)
        for i in members
        if _numel(graph.nodes[i].outputs[0]) == size
    )


def _fused_node(graph: Graph, members: list[int], reduction: Node | None = None) -> Node | None:
    """The ``fused`` node of a region, ending in ``reduction`` (a full ``sum``) when given."""
    expr, inputs = _compose(graph, members)
    if expr_size(expr) > MAX_EXPR_NODES:
        return None
    nodes = [graph.nodes[i] for i in members] + ([reduction] if reduction is not None else [])
    locs = tuple(n.loc for n in nodes if n.loc)
    root = nodes[-1]
    attrs = {
        "expr": expr,
        "args": tuple(f"a{i}" for i in range(len(inputs))),
        "dtype": root.outputs[0].dtype,
        "locs": locs,
    }
    if reduction is not None:
        attrs.update(reduce=reduction.op, keepdims=bool(reduction.attrs["keepdims"]))
    recompute = any(n.recompute for n in nodes)  # explain lists it; cse keeps it apart
    return Node(FUSED.name, inputs, root.outputs, attrs, locs[0] if locs else None, recompute)


def _one_loop(cost: FusionCost, node: Node) -> bool:
    """Whether the backend's kernel of a fused node is one loop (``FusionCost.one_loop``)."""
    dtypes = tuple(np.dtype(v.dtype).name for v in node.inputs)
    return cost.one_loop(node.attrs["expr"], node.attrs["args"], dtypes)


def cost_model(device: Device | str = "cpu") -> FusionCost:
    """When fusing pays on ``device``: its backend's ``FusionCost``.

    Example:
        >>> cost_model("cpu").min_size == MIN_FUSE_SIZE
        True
    """
    return backend_of(Device(device).xp).fusion


def _built(
    graph: Graph, cost: FusionCost, members: list[int], reduction: Node | None
) -> tuple[list[int], Node | None]:
    """The region's members and ``fused`` node; when its kernel is not one loop only because of
    steps on one-element values (an Adam update's bias corrections: ``beta ** t`` is libm's pow
    in numba, numpy's own in eager, so the blocked evaluator ran the whole update), those steps
    stay plan steps (eager's own ufunc calls on the scalars, once per call) and the rest of the
    region is the fused node, one loop. An elementwise step of a one-element value reads only
    one-element values, so the members left still form a region."""
    fused = _fused_node(graph, members, reduction)
    if fused is None or reduction is not None or _numel(fused.outputs[0]) == 1:
        return members, fused
    kept = [i for i in members if _numel(graph.nodes[i].outputs[0]) != 1]
    if len(kept) == len(members) or _one_loop(cost, fused):
        return members, fused
    smaller = _fused_node(graph, kept)
    return (kept, smaller) if smaller is not None and _one_loop(cost, smaller) else (members, fused)


def _reduced_producer(
    graph: Graph, node: Node, escaping: set[Value], index: dict[int, int]
) -> int | None:
    """The index of the fusible node whose value only ``node``, a full reduction, reads."""
    if node.op not in REDUCTIONS or node.attrs.get("axis") is not None:
        return None
    (x,) = node.inputs
    producer = graph.producers.get(x) if isinstance(x, Value) else None
    if producer is None or not fusible(producer) or x in escaping:
        return None
    # read by the reduction alone: otherwise the elementwise value must exist anyway
    if any(u is not node for u in graph.users.get(x, ())):
        return None
    return index[id(producer)]


def fuse(
    graph: Graph, min_size: int | None = None, sums: bool = True, device: Device | str = "cpu"
) -> Graph:
    """Replace each maximal elementwise region worth fusing on ``device`` (its backend's
    ``FusionCost.worth``, below the model's ``min_size`` unless given) by one ``fused`` node
    placed at the region's last node; the same graph if none qualifies.

    With ``sums``, a full ``sum`` (``axis=None``) whose input only it reads, made by a region of
    ≥ 1 node of ≥ ``min_size`` elements, joins that region: the fused node replaces the sum
    (and adds in float64: the ``fused_sum`` rule of ``passes/rules.py``).

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((8,), "float32")
        >>> (h,) = b.node("multiply", [x, 0.5]); b.output(*b.node("tanh", [h]))
        >>> [n.op for n in fuse(b.build(), min_size=0).nodes]
        ['fused']
    """
    cost = cost_model(device)
    min_size = cost.min_size if min_size is None else min_size
    leaving = escaping(graph)
    index = {id(n): i for i, n in enumerate(graph.nodes)}
    taken: set[int] = set()
    replaced: dict[int, Node | None] = {}  # node index -> its fused node (None: dropped)
    for root in range(len(graph.nodes) - 1, -1, -1):
        node = graph.nodes[root]
        if root in taken:
            continue
        producer = _reduced_producer(graph, node, leaving, index) if sums else None
        if producer is not None and producer not in taken:
            # one elementwise node is enough here: fusing saves the temporary it writes
            members = _region(graph, producer, taken, leaving, index)
            reduction, enough = node, _numel(graph.nodes[producer].outputs[0]) >= min_size
            loop = False
        elif fusible(node):
            members, reduction = _region(graph, root, taken, leaving, index), None
            calls, size = _full_size_calls(graph, members), _numel(node.outputs[0])
            enough, loop = cost.worth(calls, size, min_size)
        else:
            continue
        members, fused = (
            _built(graph, cost, members, reduction) if enough or loop else (members, None)
        )
        if fused is None or (loop and not _one_loop(cost, fused)):
            continue
        taken.update(members + [root])
        replaced.update({i: None for i in members})
        replaced[root] = fused
    if not replaced:
        return graph
    nodes = (replaced.get(i, n) for i, n in enumerate(graph.nodes))
    return graph.replace(nodes=tuple(n for n in nodes if n is not None))


def _numel(value: Value) -> int:
    size = 1
    for d in value.shape:
        size *= d
    return size
