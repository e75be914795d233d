"""Folding: constant folding, algebraic identities and multiply+add -> ``fma`` (operation folding).

Each rule applies only when the replacement has exactly the replaced value's shape and dtype, and
its bits and memory layout (so later reductions sum in eager's order): ``multiply(x, 1) => x``,
``multiply(1, x) => x``, ``divide(x, 1) => x``, ``negative(negative(x)) => x`` and
``cast(x, x.dtype) => x`` when ``x`` is dense (numpy's copy would have its strides);
``add(x, -0.0) => x``, ``add(-0.0, x) => x``, ``subtract(x, 0) => x`` (``x + 0.0`` turns ``-0.0``
into ``0.0``; integers fold any zero); ``transpose(transpose(x, p), q) => x`` if ``p[q]`` is the
identity else ``transpose(x, p[q])``, ``transpose(x, identity) => x``, ``reshape(x) => x`` (same
shape), ``reshape(reshape(x, s), t) => reshape(x, t)`` when ``x`` is C-ordered, ``stop_gradient(x)
=> x`` (gradients are already traced), ``add(multiply(a, b), c) => fma(a, b, c)`` and
``add(c, multiply(a, b)) => fma(a, b, c)`` when the multiply has no other use (``fma`` rounds
twice, as the unfused ops do). Pure nodes whose inputs are all constants or literals become
constants (up to 1 MiB) when numpy's result is C-ordered, and so does ``full_like(x)`` of a
C-ordered ``x`` (it reads only x's type: the backward seed ``ones_like(loss)``); an elementwise
node reading ``broadcast_to(x)`` reads ``x`` where that keeps its output's type (numpy broadcasts
alike). Every rule preserves bits; replaced
values' uses, graph outputs and update sources are rewired; nodes left unused are for dce.

In the example ``%5`` multiplies a dense ``tanh`` result by one.

Before::

    graph f(%0: float32[2,3] "x", %1: float32[2,3] "y") {
      const %2: float32[3]
      %3: float32[3] = multiply(%2, 2.0)  # m.py:1
      %4: float32[2,3] = tanh(%0)  # m.py:2
      %5: float32[2,3] = multiply(%4, 1.0)  # m.py:3
      %6: float32[3,2] = transpose(%5) {axes=(1, 0)}  # m.py:4
      %7: float32[2,3] = transpose(%6) {axes=(1, 0)}  # m.py:5
      %8: float32[2,3] = multiply(%7, %3)  # m.py:6
      %9: float32[2,3] = add(%8, %1)  # m.py:7
      return %9
    }

After::

    graph f(%0: float32[2,3] "x", %1: float32[2,3] "y") {
      const %2: float32[3]
      const %3: float32[3]
      %4: float32[2,3] = tanh(%0)  # m.py:2
      %6: float32[3,2] = transpose(%4) {axes=(1, 0)}  # m.py:4
      %8: float32[2,3] = multiply(%4, %3)  # m.py:6
      %9: float32[2,3] = fma(%4, %3, %1)  # m.py:7
      return %9
    }
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dualflow.graph_ir.interpret import run_node
from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.graph_ir.layout import ANY, C, exact_in_any_layout, layouts
from dualflow.graph_ir.rewrite import escaping, is_effectful, rebuild, rewire
from dualflow.ops.registry import OPS, Meta

MAX_FOLD_BYTES = 1 << 20  # larger constants would bloat saved graphs more than they save


class _Rewrite:
    """The state of one fold run: constants so far, substitutions and the new nodes' producers."""

    def __init__(self, graph: Graph) -> None:
        self.consts: dict[Value, np.ndarray] = dict(graph.consts)
        self.subst: dict[Value, Value] = {}
        self.producers: dict[Value, Node] = {}
        self.nodes: list[Node] = []
        self.changed = False
        self.layout = layouts(graph)  # rewrites keep values (and so their layouts) unchanged

    def emit(self, node: Node) -> None:
        self.nodes.append(node)
        self.producers.update((v, node) for v in node.outputs)

    def producer(self, value: Any, op: str) -> Node | None:
        """The node defining ``value`` when it is an ``op`` node (else None)."""
        node = self.producers.get(value) if isinstance(value, Value) else None
        return node if node is not None and node.op == op else None

    def equals(self, value: Any, number: float, sign: bool | None = None) -> bool:
        """Whether ``value`` is a literal or a constant array whose every element is ``number``
        (with that sign bit, when ``sign`` is given: ``-0.0`` and ``0.0`` differ in bits)."""
        if isinstance(value, Value):
            array = self.consts.get(value)
            return (
                array is not None
                and array.size > 0
                and bool(np.all(array == number))
                and (sign is None or bool(np.all(np.signbit(array) == sign)))
            )
        if not isinstance(value, int | float) or value != number:
            return False
        return sign is None or bool(np.signbit(value)) == sign

    def neutral(self, value: Any, other: Any, number: float, sign: bool | None = None) -> bool:
        """Whether ``op(other, value)`` equals ``other`` bit for bit *and* in layout: ``value``
        is ``number`` and either a scalar (a literal or one element, which does not steer
        numpy's output order) or a C constant next to a C ``other``; ``other`` is dense, so
        numpy's result would have its strides."""
        if not isinstance(other, Value) or not self.equals(value, number, sign):
            return False
        if exact_in_any_layout(other):
            return True
        if self.layout.get(other, ANY) == ANY:
            return False
        if not isinstance(value, Value) or self.consts[value].size == 1:
            return True
        return self.layout.get(value) == C and self.layout.get(other) == C

    def dense(self, value: Any) -> bool:
        """Whether numpy's copy of ``value`` would have its strides (or the layout cannot
        change any result)."""
        return isinstance(value, Value) and (
            exact_in_any_layout(value) or self.layout.get(value, ANY) != ANY
        )


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
    if not all(np.asarray(r).flags.c_contiguous for r in results):
        return False  # a stored constant is C-ordered: it would not have eager's layout
    arrays = [np.array(r, dtype=v.dtype) for r, v in zip(results, node.outputs)]
    if any(a.shape != v.shape for a, v in zip(arrays, node.outputs)):
        return False
    state.consts.update(zip(node.outputs, arrays))
    state.layout.update((v, C) for v in node.outputs)
    return True


def _try_fill(node: Node, state: _Rewrite) -> bool:
    """``full_like`` reads only its operand's type: a constant (numpy's ``full``) where numpy's
    fill would be C-ordered (a C operand, or one whose layout cannot steer it). The backward
    seed ``ones_like(loss)`` is one; folded, its reshape and broadcast fold or fuse too."""
    like = node.inputs[0] if node.op == "full_like" else None
    if not isinstance(like, Value) or sum(v.nbytes for v in node.outputs) > MAX_FOLD_BYTES:
        return False
    if not (exact_in_any_layout(like) or state.layout.get(like) == C):
        return False
    (out,) = node.outputs
    try:  # a fill numpy warns about (NaN into an integer) runs, and warns, at every call
        with np.errstate(all="raise"):
            state.consts[out] = np.full(out.shape, node.attrs["value"], dtype=out.dtype)
    except (TypeError, ValueError, OverflowError, FloatingPointError):
        return False
    state.layout[out] = C
    return True


def _perm(axes: tuple | None, ndim: int) -> tuple[int, ...]:
    if axes is None:
        return tuple(range(ndim))[::-1]
    return tuple(int(a) % max(ndim, 1) for a in axes)


def _zero_sign(value: Any) -> bool | None:
    """The sign bit a zero must have to be neutral in ``x + zero`` (None: any zero, integers)."""
    dtype = value.dtype if isinstance(value, Value) else None
    return None if dtype is not None and np.dtype(dtype).kind in "biu" else True


def _identity(node: Node, state: _Rewrite) -> Any:
    """The operand that ``node`` is a bitwise identity on, if any (may not be type-checked yet)."""
    op, ins = node.op, node.inputs
    if op == "multiply":
        for k in (0, 1):
            if state.neutral(ins[1 - k], ins[k], 1):
                return ins[k]
        return None
    if op == "add":  # x + 0.0 is 0.0 for x = -0.0: only -0.0 is neutral for floats
        for k in (0, 1):
            if state.neutral(ins[1 - k], ins[k], 0, _zero_sign(ins[k])):
                return ins[k]
        return None
    if op == "subtract":  # x - 0.0 keeps -0.0; x - (-0.0) does not
        sign = None if _zero_sign(ins[0]) is None else False
        return ins[0] if state.neutral(ins[1], ins[0], 0, sign) else None
    if op == "divide":
        return ins[0] if state.neutral(ins[1], ins[0], 1) else None
    if op in ("negative", "cast"):  # both allocate numpy's dense copy of their operand
        inner = state.producer(ins[0], "negative") if op == "negative" else node
        return inner.inputs[0] if inner is not None and state.dense(inner.inputs[0]) else None
    if OPS[op].passthrough:  # stop_gradient, reshape: when the type is unchanged, the operand
        return ins[0]
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
    return Node("transpose", (source,), node.outputs, {"axes": perm}, node.loc, node.recompute)


def _reshape(node: Node, state: _Rewrite) -> Node | None:
    inner = state.producer(node.inputs[0], "reshape")
    if inner is None or not (
        state.layout.get(inner.inputs[0]) == C or exact_in_any_layout(inner.inputs[0])
    ):
        return None  # a non-C array may be copied by one reshape and viewed by the other
    return Node("reshape", (inner.inputs[0],), node.outputs, node.attrs, node.loc, node.recompute)


_STRUCTURAL: dict[str, Callable[[Node, _Rewrite], Value | Node | None]] = {
    "transpose": _transpose,
    "reshape": _reshape,
}


def _unbroadcast(node: Node, state: _Rewrite) -> Node | None:
    """An elementwise node reading ``broadcast_to(x)`` reads ``x`` where its output keeps its
    type: numpy broadcasts ``x`` to the same zero strides, so values and layout are the same,
    and the broadcast (a numpy call per step) becomes dead."""
    if OPS[node.op].kind != "elementwise":
        return None
    inputs = list(node.inputs)
    for k, value in enumerate(inputs):
        producer = state.producer(value, "broadcast_to")
        if producer is not None and isinstance(producer.inputs[0], Value):
            inputs[k] = producer.inputs[0]
    if inputs == list(node.inputs):
        return None
    narrowed = Node(node.op, tuple(inputs), node.outputs, node.attrs, node.loc, node.recompute)
    return narrowed if _infers(narrowed) else None


def _simplify(node: Node, state: _Rewrite) -> Value | Node:
    """Apply the algebraic rules until none fires: a replacement Value or the (new) node."""
    for _ in range(8):  # each rewrite shortens a chain, so this settles in a step or two
        if len(node.outputs) != 1:
            return node
        (out,) = node.outputs
        same = _identity(node, state)
        if same is not None and _same_type(same, out):
            return same
        rule = _STRUCTURAL.get(node.op, _unbroadcast)
        result = rule(node, state) if node.op in OPS else None
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
    if _try_constant(node, state) or _try_fill(node, state):
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
    roots = escaping(graph)
    nodes, changed = list(graph.nodes), False
    for i, node in enumerate(nodes):
        if node.op != "add":
            continue
        for k in (0, 1):
            m, c = node.inputs[k], node.inputs[1 - k]
            mul = graph.producers.get(m) if isinstance(m, Value) else None
            if mul is None or mul.op != "multiply" or m in roots or len(graph.users[m]) != 1:
                continue
            mark = node.recompute or mul.recompute  # a recomputation stays one (cse)
            fused = Node("fma", (*mul.inputs, c), node.outputs, {}, node.loc, mark)
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
        >>> b = GraphBuilder("f"); x = b.input((2,), "float32"); (e,) = b.node("exp", [x])
        >>> (y,) = b.node("multiply", [e, 1]); (z,) = b.node("negative", [y]); b.output(z)
        >>> g = fold(b.build()); [n.inputs for n in g.nodes], fold(g) is g
        ([(%0: float32[2],), (%1: float32[2],)], True)
    """
    state = _Rewrite(graph)
    for original in graph.nodes:
        node = rewire(original, state.subst)
        state.changed |= node is not original
        _fold_node(node, state)
    if state.changed:
        graph = rebuild(graph, state.nodes, state.consts, state.subst)
    return _multiply_add(graph)
