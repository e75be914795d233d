"""Inference batch-norm folding: ``(conv2d(x, w) + b) * s + t => conv2d(x, w * s') + (b * s + t)``
with ``s' = s`` shaped (C, 1, 1, 1); for ``matmul(x, W)`` (a linear layer's ``W = transpose(w)``)
``W``'s columns are scaled. ``s`` and ``t`` must be per output channel and computed only from
constants and state no update of this graph writes (eval batch norm's ``gamma * rsqrt(var + eps)``);
the new weight and bias are small in-graph ops on that state, and the pass over activations goes.

Before::

    graph f(%0: float32[8,3] "x") {
      state %1: float32[2,3], %2: float32[2], %3: float32[2], %4: float32[2], %5: float32[2]
      %6: float32[3,2] = transpose(%1) {axes=None}  # m.py:1
      %7: float32[8,2] = matmul(%0, %6)  # m.py:1
      %8: float32[2] = add(%5, 1e-05)  # m.py:2
      %9: float32[2] = rsqrt(%8)  # m.py:2
      %10: float32[2] = multiply(%2, %9)  # m.py:2
      %11: float32[2] = multiply(%4, %10)  # m.py:2
      %12: float32[2] = subtract(%3, %11)  # m.py:2
      %13: float32[1,2] = reshape(%10) {shape=(1, -1)}  # m.py:2
      %14: float32[8,2] = multiply(%7, %13)  # m.py:2
      %15: float32[1,2] = reshape(%12) {shape=(1, -1)}  # m.py:2
      %16: float32[8,2] = add(%14, %15)  # m.py:2
      %17: float32[8,2] = relu(%16)  # m.py:3
      return %17
    }

After::

    graph f(%0: float32[8,3] "x") {
      state %1: float32[2,3], %2: float32[2], %3: float32[2], %4: float32[2], %5: float32[2]
      %6: float32[3,2] = transpose(%1) {axes=None}  # m.py:1
      %8: float32[2] = add(%5, 1e-05)  # m.py:2
      %9: float32[2] = rsqrt(%8)  # m.py:2
      %10: float32[2] = multiply(%2, %9)  # m.py:2
      %11: float32[2] = multiply(%4, %10)  # m.py:2
      %12: float32[2] = subtract(%3, %11)  # m.py:2
      %13: float32[1,2] = reshape(%10) {shape=(1, -1)}  # m.py:2
      %15: float32[1,2] = reshape(%12) {shape=(1, -1)}  # m.py:2
      %18: float32[3,2] = multiply(%6, %10)  # m.py:2
      %19: float32[8,2] = matmul(%0, %18)  # m.py:1
      %16: float32[8,2] = add(%19, %12)  # m.py:2
      %17: float32[8,2] = relu(%16)  # m.py:3
      return %17
    }
"""

from __future__ import annotations

from dataclasses import dataclass

from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.graph_ir.rewrite import is_effectful

# The ops whose output channels fold, and which axis of their output is the channel axis.
_CHANNEL_AXIS = {"conv2d": 1, "matmul": -1}


@dataclass(frozen=True)
class _Match:
    """A foldable chain: ``core`` (conv2d/matmul) [+ bias], then ``* scale + shift`` at ``tail``."""

    core: Node
    bias: Value | None
    scale: Value
    shift: Value
    tail: Node
    removed: tuple[Node, ...]  # the chain's nodes before ``tail``; none has another use


class _Fold:
    """The state of one run: producers, use counts and frozen values, kept current as we rewrite."""

    def __init__(self, graph: Graph) -> None:
        self.producers: dict[Value, Node] = dict(graph.producers)
        self.uses = {v: len(ns) for v, ns in graph.users.items()}
        for v in (*graph.outputs, *(new for _, new in graph.updates)):
            self.uses[v] = self.uses.get(v, 0) + 1  # escaping values count as used elsewhere
        self.frozen = _frozen(graph)
        every = (*graph.inputs, *graph.state, *graph.consts, *self.producers)
        self.next_id = max((v.id for v in every), default=-1) + 1
        self.emitted: list[Node] = []  # the current rewrite's new nodes, in order

    def value(self, shape: tuple[int, ...], dtype: str) -> Value:
        self.next_id += 1
        return Value(self.next_id - 1, shape, dtype)

    def node(self, op: str, inputs: tuple, like: tuple, loc: str | None, **attrs) -> Value:
        """A new node computing a value shaped ``like[0]`` of dtype ``like[1]`` (emitted later)."""
        (out,) = outs = (self.value(tuple(like[0]), like[1]),)
        self.producers[out] = node = Node(op, tuple(inputs), outs, attrs, loc)
        self.emitted.append(node)
        self.uses[out] = 1
        if all(v in self.frozen for v in node.value_inputs):
            self.frozen.add(out)
        return out

    def sole(self, value: object, op: str | None = None) -> Node | None:
        """The producer of ``value`` when it has exactly one use (and is an ``op`` node)."""
        node = self.producers.get(value) if isinstance(value, Value) else None
        if node is None or self.uses.get(value, 0) != 1 or (op and node.op != op):
            return None
        return node


def _frozen(graph: Graph) -> set[Value]:
    """Values computed only from constants and state that no update of this graph writes."""
    written = {target for target, _ in graph.updates}
    frozen = set(graph.consts) | {v for v in graph.state if v not in written}
    for node in graph.nodes:
        if not is_effectful(node) and all(v in frozen for v in node.value_inputs):
            frozen.update(node.outputs)
    return frozen


def _per_channel(value: object, like: Value, axis: int, state: _Fold) -> bool:
    """Whether ``value`` is frozen, of ``like``'s dtype, and varies only along ``axis``."""
    if not isinstance(value, Value) or value not in state.frozen or value.dtype != like.dtype:
        return False
    ndim = len(like.shape)
    if len(value.shape) > ndim:
        return False
    padded = (1,) * (ndim - len(value.shape)) + value.shape
    want = tuple(like.shape[i] if i == axis % ndim else 1 for i in range(ndim))
    return padded == want


def _pairs(inputs: tuple) -> tuple[tuple[object, object], ...]:
    """Both (operand, other operand) orders of a binary op's inputs."""
    return ((inputs[0], inputs[1]), (inputs[1], inputs[0]))


def _core(value: object, state: _Fold) -> tuple[Node, Value | None, tuple[Node, ...]] | None:
    """The conv2d/matmul chain producing ``value``: (core node, frozen bias or None, chain)."""
    node = state.sole(value)
    if node is None or value in state.frozen:
        return None
    bias, chain = None, (node,)
    if node.op == "add":
        for a, b in _pairs(node.inputs):
            inner = state.sole(a)
            if inner is not None and inner.op in _CHANNEL_AXIS:
                node, bias, chain = inner, b, (inner, node)
                break
    if node.op not in _CHANNEL_AXIS or node.outputs[0].shape != value.shape:
        return None
    (x, weight), out = node.inputs, node.outputs[0]
    if weight not in state.frozen or x in state.frozen or weight.dtype != out.dtype:
        return None  # a foreign weight dtype would change the scaled weight's type
    if node.op == "matmul" and len(weight.shape) != 2:
        return None  # a batched right operand has no single column per output channel
    if bias is not None and not _per_channel(bias, out, _CHANNEL_AXIS[node.op], state):
        return None
    return node, bias, chain


def _affine_forms(tail: Node, state: _Fold) -> list[tuple[Node, tuple, object]]:
    """(product node, its two operands, shift) readings of ``tail`` as ``h * s + t``."""
    if tail.op == "fma":
        return [(tail, tail.inputs[:2], tail.inputs[2])]
    if tail.op != "add":
        return []
    forms = []
    for a, b in _pairs(tail.inputs):
        product = state.sole(a, "multiply")
        if product is not None:
            forms.append((product, product.inputs, b))
    return forms


def _match(tail: Node, state: _Fold) -> _Match | None:
    """A foldable chain ending at ``tail``: ``add(multiply(h, s), t)`` or ``fma(h, s, t)``."""
    for product, scaled, shift in _affine_forms(tail, state):
        for h, scale in _pairs(scaled):
            found = _core(h, state)
            if found is None:
                continue
            axis, out = _CHANNEL_AXIS[found[0].op], tail.outputs[0]
            if out.shape != h.shape or out.dtype != h.dtype:
                continue
            if _per_channel(scale, h, axis, state) and _per_channel(shift, out, axis, state):
                extra = (product,) if product is not tail else ()
                return _Match(found[0], found[1], scale, shift, tail, found[2] + extra)
    return None


def _vector(value: Value, channels: int, state: _Fold, loc: str | None) -> Value:
    """``value`` as a (C,) vector, looking through the reshape that made it (C, 1, 1)-like."""
    if value.shape == (channels,):
        return value
    node = state.producers.get(value)
    if node is not None and node.op == "reshape" and node.inputs[0].shape == (channels,):
        return node.inputs[0]
    return state.node("reshape", (value,), ((channels,), value.dtype), loc, shape=(channels,))


def _rewrite(match: _Match, state: _Fold) -> list[Node]:
    """The nodes replacing the chain, placed at its tail (all their operands exist by then)."""
    core, out, loc = match.core, match.tail.outputs[0], match.tail.loc
    channels, dtype = out.shape[_CHANNEL_AXIS[core.op]], out.dtype
    vector = ((channels,), dtype)
    state.emitted = []
    scale = _vector(match.scale, channels, state, loc)
    bias = _vector(match.shift, channels, state, loc)
    if match.bias is not None:  # b * s + t
        old = _vector(match.bias, channels, state, loc)
        bias = state.node(
            "add", (state.node("multiply", (old, scale), vector, loc), bias), vector, loc
        )
    x, weight = core.inputs
    if core.op == "conv2d":  # output channels are the weight's first axis, a matmul's its last
        column = (channels, 1, 1, 1)
        scale = state.node("reshape", (scale,), (column, dtype), loc, shape=column)
        row = (1, channels, 1, 1)
        bias = state.node("reshape", (bias,), (row, dtype), loc, shape=row)
    weight = state.node("multiply", (weight, scale), (weight.shape, dtype), loc)
    y = state.node(core.op, (x, weight), (out.shape, dtype), core.loc, **core.attrs)
    final = Node("add", (y, bias), (out,), {}, loc)
    state.producers[out] = final
    return [*state.emitted, final]


def fold_bn(graph: Graph) -> Graph:
    """Fold frozen per-channel affine maps (eval batch norm) into the preceding conv2d/matmul.

    Returns ``graph`` itself when nothing matches; chained maps fold in one run (idempotent).
    Folding reassociates, so results change by rounding only: with ``K`` products per output
    (``C_in / groups * kh * kw``, or the matmul's inner size) and unit roundoff ``u`` (2^-24 for
    float32, 2^-53 for float64), each of the two is within ``g(K + 3) M`` of the exact value,
    ``g(k) = k u / (1 - k u)``, ``M = |s| sum_k |x_k w_k| + |b s| + |t|``, so ``|folded -
    unfolded| <= 2 g(K + 3) M`` (the ``fold_bn`` rule of ``passes/rules.py``); typically about
    ``sqrt(K) u M``.

    Example:
        >>> from dualflow.graph_ir import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2, 3), "float64")
        >>> w = b.add_state((3, 4), "float64")
        >>> s, t = b.add_state((4,), "float64"), b.add_state((4,), "float64")
        >>> (h,) = b.node("matmul", [x, w]); (y,) = b.node("multiply", [h, s])
        >>> (z,) = b.node("add", [y, t]); b.output(z)
        >>> g = fold_bn(b.build()); [n.op for n in g.nodes], fold_bn(g) is g
        (['multiply', 'matmul', 'add'], True)
    """
    nodes, dropped, _ = _fold(graph)
    if not dropped:
        return graph
    return graph.replace(nodes=tuple(n for n in nodes if id(n) not in dropped))


def folds_and_producers(graph: Graph) -> tuple[list[_Match], dict[Value, Node]]:
    """The chains ``fold_bn`` folds in ``graph``, in schedule order (``passes/rules.py`` bounds the
    difference each one makes), and the producer of every value the rewrite made, including those
    a later fold of the same chain replaced (a chained fold's core reads such a folded weight).

    Example:
        >>> from dualflow.graph_ir import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2, 3), "float64")
        >>> w = b.add_state((3, 4), "float64")
        >>> s, t = b.add_state((4,), "float64"), b.add_state((4,), "float64")
        >>> (h,) = b.node("matmul", [x, w]); (y,) = b.node("multiply", [h, s])
        >>> (z,) = b.node("add", [y, t]); b.output(z)
        >>> matches, producers = folds_and_producers(b.build())
        >>> producers[matches[0].tail.outputs[0]].op
        'add'
    """
    nodes, _, matches = _fold(graph)
    return matches, {v: node for node in nodes for v in node.outputs}


def _fold(graph: Graph) -> tuple[list[Node], set[int], list[_Match]]:
    """The rewritten schedule (dropped nodes still in it), the dropped nodes' ids, the matches."""
    state = _Fold(graph)
    dropped: set[int] = set()
    nodes: list[Node] = []
    matches: list[_Match] = []
    for node in graph.nodes:
        match = _match(node, state)
        if match is None:
            nodes.append(node)
            continue
        matches.append(match)
        dropped.update(id(n) for n in (*match.removed, match.tail))
        nodes.extend(_rewrite(match, state))
    return nodes, dropped, matches
