"""What the passes and the runtime can know about the memory layout numpy gives each value, so
that rewrites which replace a computed value by another array keep eager's layout (and so every
later reduction's summation order, and BLAS's path), and plans know which steps' operands are
C-ordered: ``"C"`` (C-contiguous), ``"dense"`` (no gaps, positive strides, in some axis order)
or ``"any"`` (unknown: inputs, state, most non-elementwise ops). Each op's ``layout`` fact says
how its result's layout follows from its operands'.

Why it matters: numpy allocates an elementwise result in its operands' memory order, so
``x * 1`` is a *dense* copy of ``x``; replacing it by a strided ``x`` keeps every value but
changes how ``sum(axis=...)`` later walks it, and that changes the float result.
"""

from __future__ import annotations

import numpy as np

from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.ops.registry import OPS

C, DENSE, ANY = "C", "dense", "any"
# A C array broadcast to a larger shape (zero strides added, the others in C order): numpy
# allocates an elementwise result of such operands C-ordered, as for C operands.
C_BROADCAST = "C-broadcast"
_C_LIKE = (C, C_BROADCAST)


def array_layout(array: np.ndarray) -> str:
    """The layout class of a concrete array.

    Example:
        >>> a = np.ones((3, 4))
        >>> array_layout(a), array_layout(a.T), array_layout(a[:, ::2])
        ('C', 'dense', 'any')
    """
    if array.flags.c_contiguous:
        return C
    order = np.argsort(array.strides)
    expected = array.itemsize
    for axis in order:  # innermost first: each stride must be the size of the axes inside it
        if array.shape[axis] == 1:
            continue
        if array.strides[axis] != expected:
            return ANY
        expected *= array.shape[axis]
    return DENSE


def exact_in_any_layout(value: Value) -> bool:
    """Whether no layout of ``value`` can change a result computed from it: integer and bool
    arithmetic is exact in any summation order (floats are not).

    Example:
        >>> exact_in_any_layout(Value(0, (2,), "int64")), exact_in_any_layout(Value(1, (2,), "float32"))
        (True, False)
    """  # noqa: E501
    return np.dtype(value.dtype).kind in "biu"


def _operands(ins: list[str]) -> str:
    return C if all(k == C for k in ins) else DENSE  # numpy's order='K' allocation


def _elementwise(ins: list[str]) -> str:
    return C if all(k in _C_LIKE for k in ins) else DENSE  # broadcasts of C arrays count as C


# An op's ``layout`` fact -> its result's layout from its operands' layouts.
RULES = {
    C: lambda ins: C,  # allocated C-ordered whatever the operands (matmul)
    "operands": _operands,  # reductions
    "elementwise": _elementwise,  # elementwise ops and fused nodes
    "broadcast": lambda ins: C_BROADCAST if ins and ins[0] in _C_LIKE else ANY,
    "first": lambda ins: ins[0] if ins else ANY,  # the first operand itself (assign, views)
    "permute": lambda ins: DENSE if ins and ins[0] in (C, DENSE) else ANY,  # a permuted dense
    "reshape": lambda ins: C if ins and ins[0] == C else ANY,  # numpy views a C array as C
    ANY: lambda ins: ANY,
}


def _node_layout(node: Node, known: dict[Value, str]) -> str:
    if all(int(np.prod(v.shape)) <= 1 for v in node.outputs):
        return C  # an array of at most one element is C-contiguous whatever its strides
    op = OPS.get(node.op)
    rule = RULES[op.layout] if op is not None else RULES[ANY]
    return rule([known.get(v, ANY) for v in node.value_inputs])


def layouts(graph: Graph, arguments: str = ANY) -> dict[Value, str]:
    """The layout class of every value of ``graph``: constants from their arrays, inputs and
    state as ``arguments`` says (unknown by default: callers may pass any strides; a plan that
    checked its arguments at run time may assume ``C``).

    Example:
        >>> from dualflow.graph_ir import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2, 3), "float32")
        >>> (y,) = b.node("exp", [x]); (t,) = b.node("transpose", [y], {"axes": (1, 0)})
        >>> (z,) = b.node("matmul", [t, y]); b.output(z)
        >>> [layouts(b.build())[v] for v in (x, y, t, z)]
        ['any', 'dense', 'dense', 'C']
    """
    known: dict[Value, str] = {v: arguments for v in (*graph.inputs, *graph.state)}
    known.update((v, array_layout(np.asarray(a))) for v, a in graph.consts.items())
    for node in graph.nodes:
        layout = _node_layout(node, known)
        known.update((v, layout) for v in node.outputs)
    return known


def _permutes_order(node: Node) -> bool:
    """Whether a permute node moves two axes longer than 1 past each other (so a C input gives
    a result that is not C-contiguous)."""
    shape, axes = node.inputs[0].shape, node.attrs.get("axes")
    order = tuple(reversed(range(len(shape)))) if axes is None else tuple(axes)
    kept = [a for a in order if shape[a] > 1]
    return kept != sorted(kept)


def surely_strided(graph: Graph) -> set[Value]:
    """Values numpy surely gives a non-C layout when the arguments are C: non-trivial transposes
    of C values, and elementwise results whose full-shape operands are all such (order 'K').

    Example:
        >>> from dualflow.graph_ir import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2, 3), "float32")
        >>> (y,) = b.node("exp", [x]); (t,) = b.node("transpose", [y], {"axes": (1, 0)})
        >>> (u,) = b.node("tanh", [t]); b.output(u)
        >>> sorted(v.id for v in surely_strided(b.build())) == [t.id, u.id]
        True
    """
    known, found = layouts(graph, C), set()
    for node in graph.nodes:
        op = OPS.get(node.op)
        if op is None or len(node.outputs) != 1 or int(np.prod(node.outputs[0].shape)) <= 1:
            continue
        out = node.outputs[0]
        if op.layout == "permute" and known.get(node.inputs[0]) == C and _permutes_order(node):
            found.add(out)
        elif op.layout == "elementwise":
            full = [v for v in node.value_inputs if v.shape == out.shape]
            if full and all(v in found for v in full):
                found.add(out)
    return found
