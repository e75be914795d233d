"""Folding: constant folding, algebraic identities and multiply+add -> ``fma`` (operation folding).

Each rule applies only when the replacement has exactly the replaced value's shape and dtype:
``multiply(x, 1) => x``, ``multiply(1, x) => x``, ``add(x, 0) => x``, ``add(0, x) => x``,
``subtract(x, 0) => x``, ``divide(x, 1) => x``, ``negative(negative(x)) => x``,
``transpose(transpose(x, p), q) => x`` if ``p[q] == identity`` else ``transpose(x, p[q])``,
``transpose(x, identity) => x``, ``reshape(reshape(x, s), t) => reshape(x, t)``,
``reshape(x) => x`` (same shape), ``cast(x, x.dtype) => x``, ``stop_gradient(x) => x``
(gradients are already traced), ``add(multiply(a, b), c) => fma(a, b, c)`` and
``add(c, multiply(a, b)) => fma(a, b, c)`` when the multiply has no other use.
Pure nodes whose inputs are all constants or literals become constants (up to 1 MiB). Replaced
values' uses, graph outputs and update sources are rewired; nodes left unused are for dce.

Before::

    graph f(%0: float32[2,3] "x", %1: float32[2,3] "y") {
      const %2: float32[3]
      %3: float32[3] = multiply(%2, 2.0)  # m.py:1
      %4: float32[2,3] = multiply(%0, 1.0)  # m.py:2
      %5: float32[3,2] = transpose(%4) {axes=(1, 0)}  # m.py:3
      %6: float32[2,3] = transpose(%5) {axes=(1, 0)}  # m.py:4
      %7: float32[2,3] = multiply(%6, %3)  # m.py:5
      %8: float32[2,3] = add(%7, %1)  # m.py:6
      return %8
    }

After::

    graph f(%0: float32[2,3] "x", %1: float32[2,3] "y") {
      const %2: float32[3]
      const %3: float32[3]
      %5: float32[3,2] = transpose(%0) {axes=(1, 0)}  # m.py:3
      %7: float32[2,3] = multiply(%0, %3)  # m.py:5
      %8: float32[2,3] = fma(%0, %3, %1)  # m.py:6
      return %8
    }
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dualflow.graph_ir.interpret import run_node
from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.ops.registry import OPS, Meta
from dualflow.passes.cse import rebuild, rewire
from dualflow.passes.dce import is_effectful

MAX_FOLD_BYTES = 1 << 20  # larger constants would bloat saved graphs more than they save


class _Rewrite:
    """The state of one fold run: constants so far, substitutions and the new nodes' producers."""

    def __init__(self, graph: Graph) -> None:
        self.consts: dict[Value, np.ndarray] = dict(graph.consts)
        self.subst: dict[Value, Value] = {}
        self.producers: dict[Value, Node] = {}
        self.nodes: list[Node] = []
        self.changed = False

    def emit(self, node: Node) -> None:
        self.nodes.append(node)
        self.producers.update((v, node) for v in node.outputs)

    def producer(self, value: Any, op: str) -> Node | None:
        """The node defining ``value`` when it is an ``op`` node (else None)."""
        node = self.producers.get(value) if isinstance(value, Value) else None
        return node if node is not None and node.op == op else None

    def equals(self, value: Any, number: float) -> bool:
        """Whether ``value`` is a literal or a constant array whose every element is ``number``."""
        if isinstance(value, Value):
            array = self.consts.get(value)
            return array is not None and array.size > 0 and bool(np.all(array == number))
        return isinstance(value, int | float) and value == number


def _same_type(a: Any, b: Value) -> bool:
    return isinstance(a, Value) and a.shape == b.shape and a.dtype == b.dtype


def _try_constant(node: Node, state: _Rewrite) -> bool:
    """Evaluate a pure node whose inputs are all constants/literals; its outputs become consts."""
    if not all(v in state.consts for v in node.value_inputs):
        return False
    if sum(v.nbytes for v in node.outputs) > MAX_FOLD_BYTES:
        return False
    args = [state.consts[v] if isinstance(v, Value) else v for v in node.inputs]
    try:
        with np.errstate(all="ignore"):
            results = run_node(node, args)
    except Exception:  # a failing op is left for the runtime to report
        return False
    arrays = [np.array(r, dtype=v.dtype) for r, v in zip(results, node.outputs)]
    if any(a.shape != v.shape for a, v in zip(arrays, node.outputs)):
        return False
    state.consts.update(zip(node.outputs, arrays))
    return True


def _perm(axes: tuple | None, ndim: int) -> tuple[int, ...]:
    if axes is None:
        return tuple(range(ndim))[::-1]
    return tuple(int(a) % max(ndim, 1) for a in axes)


def _identity(node: Node, state: _Rewrite) -> Any:
    """The operand that ``node`` is an identity on, if any (may not be type-checked yet)."""
    op, ins = node.op, node.inputs
    if op == "multiply":
        return ins[0] if state.equals(ins[1], 1) else ins[1] if state.equals(ins[0], 1) else None
    if op == "add":
        return ins[0] if state.equals(ins[1], 0) else ins[1] if state.equals(ins[0], 0) else None
    if (op == "subtract" and state.equals(ins[1], 0)) or (
        op == "divide" and state.equals(ins[1], 1)
    ):
        return ins[0]
    if op == "negative":
        inner = state.producer(ins[0], "negative")
        return inner.inputs[0] if inner is not None else None
    if op in ("stop_gradient", "reshape", "cast"):
        return ins[0]  # reshape/cast are identities exactly when the type is unchanged
    return None


def _transpose(node: Node, state: _Rewrite) -> Value | Node | None:
    source = node.inputs[0]
    if not isinstance(source, Value):
        return None
    perm = _perm(node.attrs.get("axes"), len(source.shape))
    inner = state.producer(source, "transpose")
    if inner is not None and isinstance(inner.inputs[0], Value):
        source = inner.inputs[0]
        first = _perm(inner.attrs.get("axes"), len(source.shape))
        perm = tuple(first[q] for q in perm)  # out[i] = inner[q[i]] = x[p[q[i]]]
    if perm == tuple(range(len(perm))):
        return source
    if source is node.inputs[0]:
        return None
    return Node("transpose", (source,), node.outputs, {"axes": perm}, node.loc)


def _reshape(node: Node, state: _Rewrite) -> Node | None:
    inner = state.producer(node.inputs[0], "reshape")
    if inner is None:
        return None
    return Node("reshape", (inner.inputs[0],), node.outputs, node.attrs, node.loc)


_STRUCTURAL: dict[str, Callable[[Node, _Rewrite], Value | Node | None]] = {
    "transpose": _transpose,
    "reshape": _reshape,
}


def _simplify(node: Node, state: _Rewrite) -> Value | Node:
    """Apply the algebraic rules until none fires: a replacement Value or the (new) node."""
    for _ in range(8):  # each rewrite shortens a chain, so this settles in a step or two
        if len(node.outputs) != 1:
            return node
        (out,) = node.outputs
        same = _identity(node, state)
        if same is not None and _same_type(same, out):
            return same
        rule = _STRUCTURAL.get(node.op)
        result = rule(node, state) if rule is not None else None
        if isinstance(result, Value) and _same_type(result, out):
            return result
        if not isinstance(result, Node):
            return node
        node = result
    return node


def _fold_node(node: Node, state: _Rewrite) -> None:
    if is_effectful(node) or not node.outputs:
        state.emit(node)
        return
    if _try_constant(node, state):
        state.changed = True
        return
    result = _simplify(node, state)
    if isinstance(result, Value):
        state.subst[node.outputs[0]] = result
        state.changed = True
        return
    state.changed |= result is not node
    state.emit(result)


def _multiply_add(graph: Graph) -> Graph:
    """Turn ``add(multiply(a, b), c)`` into ``fma(a, b, c)`` where the multiply has no other use."""
    roots = set(graph.outputs) | {new for _, new in graph.updates}
    nodes, changed = list(graph.nodes), False
    for i, node in enumerate(nodes):
        if node.op != "add":
            continue
        for k in (0, 1):
            m, c = node.inputs[k], node.inputs[1 - k]
            mul = graph.producers.get(m) if isinstance(m, Value) else None
            if mul is None or mul.op != "multiply" or m in roots or len(graph.users[m]) != 1:
                continue
            fused = Node("fma", (*mul.inputs, c), node.outputs, {}, node.loc)
            if _infers(fused):
                nodes[i], changed = fused, True
                break
    return graph.replace(nodes=tuple(nodes)) if changed else graph


def _infers(node: Node) -> bool:
    """Whether ``infer`` gives the node's declared output types (so the rewrite keeps types)."""
    metas = [
        Meta(v.shape, np.dtype(v.dtype)) if isinstance(v, Value) else Meta((), type(v))
        for v in node.inputs
    ]
    try:
        (meta,) = OPS[node.op].infer(*metas, **node.attrs)
    except (TypeError, ValueError):
        return False
    (out,) = node.outputs
    return tuple(meta.shape) == out.shape and np.dtype(meta.dtype).name == out.dtype


def fold(graph: Graph) -> Graph:
    """Constant-fold, apply the algebraic rules and fold multiply+add; ``graph`` if unchanged.

    Example:
        >>> from dualflow.graph_ir import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2,), "float32")
        >>> (y,) = b.node("multiply", [x, 1]); (z,) = b.node("negative", [y]); b.output(z)
        >>> g = fold(b.build()); [n.inputs for n in g.nodes], fold(g) is g
        ([(%0: float32[2],)], True)
    """
    state = _Rewrite(graph)
    for original in graph.nodes:
        node = rewire(original, state.subst)
        state.changed |= node is not original
        _fold_node(node, state)
    if state.changed:
        graph = rebuild(graph, state.nodes, state.consts, state.subst)
    return _multiply_add(graph)
