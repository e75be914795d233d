"""What a trace with dynamic dimensions knows beyond its graph, and the graph for other sizes.

``SymbolicShapes`` is kept by the tracing interpreter of such a trace (and shared with the
trace of its backward): the symbol of each dynamic input dimension, each value's shape as
``SymInt`` expressions (what ``Tensor.shape``, ``size()``, ``numel()`` and the backward formulas
see), the attributes and literal inputs of nodes that came from sizes (``reshape(x, (s0*16,
-1))``, ``loss / s0``), and the guards the traced code's decisions recorded. The graph itself
stays concrete, at the traced call's sizes.

``instantiate`` rebuilds that graph for another binding of the symbols: attributes and literals
evaluated, every output shape recomputed by its op's ``infer`` from the new input shapes (so a
value whose shape the facts missed is still right, or the op refuses). ``same_graph`` compares
two graphs exactly; a template is trusted only after its instance at another call's sizes is
exactly the graph a real trace of that call made (``dynamic_dims.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.graph_ir import symbolic_text
from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.ops.registry import OPS, Meta
from dualflow.symbolic_containers import has_symbols, hint_of, substitute
from dualflow.symbolic_shapes import SYMBOLIC, ShapeEnv, SymInt
from dualflow.tensor.core import Tensor


class SymbolicShapes:
    """Symbols, symbolic shapes and symbolic node facts of one trace (forward and backward).

    ``dims``: flat argument position -> the dimensions that are dynamic there.
    """

    def __init__(self, dims: dict[int, frozenset[int]]) -> None:
        self.env = ShapeEnv()
        self.dims = dims
        self.shapes: dict[Value, tuple] = {}  # values whose shape holds a SymInt
        self.nodes: dict[Node, tuple[dict | None, dict[int, SymInt]]] = {}
        self.symbols: list[tuple[int, int, str]] = []  # (flat position, dim, symbol name)
        # dynamic dimensions traced at size 0 or 1: constants of this trace, (position, dim, size)
        self.constants: list[tuple[int, int, int]] = []
        self.failure: str | None = None  # why the facts are incomplete (the trace stays static)

    def bind_input(self, value: Value, position: int, argument: bool = True) -> None:
        """Give argument ``position``'s graph input a symbol per dynamic dimension of size >= 2
        (0 and 1 stay constants: broadcasting and emptiness mean something else there); a
        backward graph's inputs (``argument`` False) take their shapes by ``alias``."""
        dims = self.dims.get(position) if argument else None
        if not dims:
            return
        shape: list[Any] = list(value.shape)
        for d in sorted(dims):
            if d < len(shape) and shape[d] >= 2:
                sym = self.env.new_symbol(shape[d])
                self.symbols.append((position, d, sym.expr))
                shape[d] = sym
            elif d < len(shape):
                self.constants.append((position, d, shape[d]))
        if has_symbols(shape):
            self.shapes[value] = tuple(shape)

    def array_sizes(self, bound: dict[int, tuple], ids: Any) -> dict[int, tuple]:
        """id(numpy argument) -> its shape with dynamic sizes as expressions, for those of
        ``ids`` that have one (``bound``: the tracer's id(array) -> (value, array))."""
        found = {k: self.shapes.get(bound[k][0]) for k in ids if k in bound}
        return {k: shape for k, shape in found.items() if shape is not None}

    def alias(self, new: Value, old: Value) -> None:
        """``new`` (a backward input: a residual or an output's gradient) has ``old``'s shape."""
        if old in self.shapes:
            self.shapes[new] = self.shapes[old]

    def touches(self, args: tuple, attrs: dict, arrays: dict) -> bool:
        """Whether an op call touches a symbolic size: an input tensor whose shape has one, a
        SymInt argument (``loss / s0``), or one in its attributes. A tensor not bound yet (a
        backward's saved output, rebuilt around the same array) is found by its array in
        ``arrays`` (the tracer's id(array) -> (value, array))."""
        for a in args:
            if isinstance(a, SYMBOLIC):
                return True
            if isinstance(a, Tensor):
                known = arrays.get(id(a.raw_array))
                value = a.value if known is None or known[1] is not a.raw_array else known[0]
                if a.value in self.shapes or value in self.shapes:
                    return True
        return has_symbols(attrs)

    def record(self, node: Node, args: tuple, attrs: dict, creator: Any) -> None:
        """Keep ``node``'s symbolic literals and attributes, infer its outputs' symbolic
        shapes (recording the guards infer's comparisons make), and give the tape node the
        symbolic attributes, so backward formulas compute sizes as expressions too."""
        literals = {i: a for i, a in enumerate(args) if isinstance(a, SYMBOLIC)}
        symbolic_attrs = attrs if has_symbols(attrs) else None
        if literals or symbolic_attrs is not None:
            self.nodes[node] = (symbolic_attrs, literals)
        metas = [
            Meta(self.shapes.get(v, v.shape), np.dtype(v.dtype))
            if type(v) is Value
            else Meta((), type(v))
            for v in node.inputs
        ]
        try:
            inferred = OPS[node.op].infer(*metas, **attrs)
        except Exception as exc:
            self.failure = self.failure or f"{node.op} at {node.loc}: sizes as expressions: {exc}"
            return
        for meta, value in zip(inferred, node.outputs):
            if has_symbols(meta.shape):
                self.shapes[value] = tuple(meta.shape)
        if creator is not None:  # backward formulas read sizes from the tape node
            creator.in_shapes = tuple(m.shape for m in metas)
            saved = creator.saved_inputs
            if literals and saved:  # a saved literal (a mean's 1/n): its expression too
                where = OPS[node.op].save_inputs
                creator.saved_inputs = tuple(literals.get(i, v) for i, v in zip(where, saved))
            if creator.out_metas is not None:
                creator.out_metas = tuple(
                    (m.shape, o[1]) for m, o in zip(inferred, creator.out_metas)
                )
            if symbolic_attrs is not None:
                creator.attrs = dict(attrs)


def split(args: tuple, attrs: dict) -> tuple[tuple, dict]:
    """The traced call's concrete arguments and attributes (SymInts at their hints)."""
    return tuple(a.hint if isinstance(a, SYMBOLIC) else a for a in args), hint_of(attrs)


def _meta(value: Any) -> Meta:
    if type(value) is Value:
        return Meta(value.shape, np.dtype(value.dtype))
    return Meta((), type(value))


def instantiate(graph: Graph, facts: SymbolicShapes, binding: dict[str, int]) -> Graph:
    """``graph`` (traced at the hints) for the sizes in ``binding``; every output shape from its
    op's ``infer``. Raises the op's own error where the new sizes do not fit it."""
    mapping: dict[Value, Value] = {}

    def resized(value: Value, shape: tuple) -> Value:
        new = value if shape == value.shape else Value(value.id, shape, value.dtype, value.name)
        mapping[value] = new
        return new

    inputs = tuple(
        resized(v, tuple(substitute(facts.shapes[v], binding))) if v in facts.shapes else v
        for v in graph.inputs
    )
    nodes = []
    for node in graph.nodes:
        attrs, literals = facts.nodes.get(node, (None, {}))
        attrs = node.attrs if attrs is None else substitute(attrs, binding)
        operands = tuple(
            substitute(literals[i], binding)
            if i in literals
            else mapping.get(x, x)
            if type(x) is Value
            else x
            for i, x in enumerate(node.inputs)
        )
        outputs = node.outputs
        if node.outputs and OPS[node.op].check_node is None:
            metas = OPS[node.op].infer(*(_meta(x) for x in operands), **attrs)
            outputs = tuple(resized(v, tuple(m.shape)) for v, m in zip(node.outputs, metas))
        nodes.append(Node(node.op, operands, outputs, attrs, node.loc, node.recompute))
    return graph.replace(
        inputs=inputs,
        nodes=tuple(nodes),
        outputs=tuple(mapping.get(v, v) for v in graph.outputs),
        updates=tuple((s, mapping.get(n, n)) for s, n in graph.updates),
    )


def symbolic_view(graph: Graph, facts: SymbolicShapes) -> Graph:
    """``graph`` for printing, with its sizes as the expressions they were traced as (``%0:
    float32[s0,784]``, ``reshape(%3) {shape=(s0*2, -1)}``): what one template serves."""
    return symbolic_text.symbolic_view(graph, facts.shapes, facts.nodes)


def print_template(graph: Graph, facts: SymbolicShapes) -> str:
    """``graph`` (forward or backward of a trace with dynamic sizes) as symbolic IR text: its
    sizes as expressions, and the symbols, fixed sizes and guards after the header.

    Example:
        >>> import dualflow
        >>> fn = dualflow.compile(lambda x: (x * 2).reshape(-1), dynamic=True)
        >>> _ = fn(dualflow.zeros(4, 3))
        >>> (template,) = next(iter(fn.dynamic.families.values())).templates
        >>> text = print_template(template.trace.source_graph, template.facts)
        >>> print(text.splitlines()[1])
          symbols s0 = arg0[0] at 4, s1 = arg0[1] at 3
        >>> graph, facts = parse_template(text)
        >>> print_template(graph, facts) == text, graph.outputs[0].shape
        (True, (12,))
    """
    return symbolic_text.print_symbolic(
        symbolic_text.SymbolicGraph(
            graph, facts.env, facts.symbols, facts.constants, facts.shapes, facts.nodes
        )
    )


def parse_template(text: str, consts: dict | None = None) -> tuple[Graph, SymbolicShapes]:
    """``print_template``'s text back: the graph at the traced sizes and its facts, ready for
    ``instantiate``. Raises ``GraphParseError`` on malformed text.

    Example:
        >>> text = ("graph f(%0: float32[s0]) {\\n  symbols s0 = arg0[0] at 3\\n"
        ...         "  %1: float32[s0] = exp(%0)\\n  return %1\\n}")
        >>> graph, facts = parse_template(text)
        >>> instantiate(graph, facts, {"s0": 5}).outputs[0].shape, facts.dims
        ((5,), {0: frozenset({0})})
    """
    parsed = symbolic_text.parse_symbolic(text, consts)
    dims: dict[int, set[int]] = {}
    for position, dim, _ in (*parsed.symbols, *parsed.constants):
        dims.setdefault(position, set()).add(dim)
    facts = SymbolicShapes({p: frozenset(d) for p, d in dims.items()})
    facts.env, facts.symbols, facts.constants = parsed.env, parsed.symbols, parsed.constants
    facts.shapes, facts.nodes = parsed.shapes, parsed.nodes
    return parsed.graph, facts


def same_graph(a: Graph, b: Graph) -> str | None:
    """None when two graphs are the same program exactly (values, constants' data, nodes'
    ops, operands, attributes and lines, outputs, updates), else the first difference."""
    for part in ("inputs", "state", "outputs"):
        if _values(getattr(a, part)) != _values(getattr(b, part)):
            return f"graph {part} differ"
    if [(s.id, n.id) for s, n in a.updates] != [(s.id, n.id) for s, n in b.updates]:
        return "state updates differ"
    if _values(a.consts) != _values(b.consts) or not all(
        _same(x, y) for x, y in zip(a.consts.values(), b.consts.values())
    ):
        return "constants differ"
    if len(a.nodes) != len(b.nodes):
        return f"{len(a.nodes)} nodes against {len(b.nodes)}"
    for x, y in zip(a.nodes, b.nodes):
        same = x.op == y.op and x.loc == y.loc and _values(x.outputs) == _values(y.outputs)
        if not same or not _same(_operands(x), _operands(y)) or not _same(x.attrs, y.attrs):
            return f"{x.op} at {x.loc} differs: a size taken as a constant ({x.attrs})"
    return None


def _values(values: Any) -> list:
    return [(v.id, v.shape, v.dtype) for v in values]


def _operands(node: Node) -> list:
    return [(x.id,) if type(x) is Value else (type(x).__name__, x) for x in node.inputs]


def _same(x: Any, y: Any) -> bool:
    """Exact equality of plain data (arrays by dtype, shape and bits; -0.0 is not 0.0)."""
    if type(x) is not type(y):
        return False
    if isinstance(x, np.ndarray):
        return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
    if isinstance(x, dict):
        return x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    if isinstance(x, list | tuple):
        return len(x) == len(y) and all(_same(p, q) for p, q in zip(x, y))
    if isinstance(x, float):
        return np.array(x).tobytes() == np.array(y).tobytes()
    try:
        return bool(x == y)
    except Exception:
        return x is y
