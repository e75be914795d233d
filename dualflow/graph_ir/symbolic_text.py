"""The text form of a graph whose sizes are expressions over symbols, and its parser (issue 39).

A trace with dynamic dimensions is a concrete graph (at the traced call's sizes, the *hints*)
plus facts: each symbol's argument dimension and hint, the symbolic shapes of values, the
symbolic attributes and literal inputs of nodes, and the guards. ``SymbolicGraph`` holds them
as plain data; ``print_symbolic`` writes the graph with its sizes as expressions and the facts
as three lines after the header; ``parse_symbolic`` reads that back (expressions by
``size_text``'s parser, never ``eval``) into a concrete graph and its facts:

    graph f(%0: float32[s0,20] "x") {
      symbols s0 = arg0[0] at 32
      fixed arg1[0] = 1
      guards s0 - 8 > 0; s0*2 - s1 == 0
      %1: float32[s0*20] = reshape(%0) {shape=(s0*20,)}  # f.py:3
      ...
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.graph_ir.parser import GraphParseError, parse_graph
from dualflow.graph_ir.printer import print_graph
from dualflow.graph_ir.size_text import MAX_DEPTH, MAX_TEXT, SizeTextError, parse_guard, parse_size
from dualflow.size_expressions import constant_of, evaluate, render_guard
from dualflow.symbolic_containers import has_symbols, hint_of, map_symbols
from dualflow.symbolic_shapes import SYMBOLIC, ShapeEnv, SymFloat, SymInt

NodeFacts = tuple  # (symbolic attrs or None, {input position: SymInt or SymFloat})


@dataclass
class SymbolicGraph:
    """A concrete graph at the hints and the facts that make it one for every size.

    ``symbols``: (argument position, dim, name); ``constants``: dynamic dimensions traced at
    size 0 or 1, (argument position, dim, size); ``shapes``: value -> its shape with SymInts;
    ``nodes``: node -> (symbolic attrs or None, {input index: symbolic literal}).
    """

    graph: Graph
    env: ShapeEnv
    symbols: list[tuple[int, int, str]] = field(default_factory=list)
    constants: list[tuple[int, int, int]] = field(default_factory=list)
    shapes: dict[Value, tuple] = field(default_factory=dict)
    nodes: dict[Node, NodeFacts] = field(default_factory=dict)


class _SizeText(str):
    """A size expression shown as itself by the printer (``s0*2``, unquoted)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)


def _as_text(value: Any) -> Any:
    return map_symbols(value, lambda s: _SizeText(s.expr))


def symbolic_view(graph: Graph, shapes: dict, nodes: dict) -> Graph:
    """``graph`` for printing, with its sizes as the expressions they were traced as (``%0:
    float32[s0,784]``, ``reshape(%3) {shape=(s0*2, -1)}``): what one template serves.

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((3,), "float32"); b.output(x)
        >>> symbolic_view(b.build(), {x: (ShapeEnv().new_symbol(3),)}, {}).inputs
        (%0: float32[s0],)
    """
    named: dict[Value, Value] = {}

    def view(v: Any) -> Any:
        if type(v) is not Value or v not in shapes:
            return v
        if v not in named:
            named[v] = Value(v.id, tuple(_as_text(shapes[v])), v.dtype, v.name)
        return named[v]

    new_nodes = []
    for node in graph.nodes:
        attrs, literals = nodes.get(node, (None, {}))
        operands = tuple(
            _as_text(literals[i]) if i in literals else view(x) for i, x in enumerate(node.inputs)
        )
        attrs = node.attrs if attrs is None else _as_text(attrs)
        outputs = tuple(view(v) for v in node.outputs)
        new_nodes.append(Node(node.op, operands, outputs, attrs, node.loc, node.recompute))
    return graph.replace(
        inputs=tuple(view(v) for v in graph.inputs),
        state=tuple(view(v) for v in graph.state),
        nodes=tuple(new_nodes),
        outputs=tuple(view(v) for v in graph.outputs),
        updates=tuple((view(s), view(n)) for s, n in graph.updates),
    )


def fact_lines(symbolic: SymbolicGraph) -> list[str]:
    """The ``symbols``, ``fixed`` and ``guards`` lines (each only when it has entries).

    Example:
        >>> env = ShapeEnv(); n = env.new_symbol(8); _ = n > 4
        >>> fact_lines(SymbolicGraph(None, env, [(0, 0, "s0")], [(1, 0, 1)]))
        ['symbols s0 = arg0[0] at 8', 'fixed arg1[0] = 1', 'guards s0 - 4 > 0']
    """
    hints = symbolic.env.hints
    lines = []
    if symbolic.symbols:
        named = (f"{n} = arg{p}[{d}] at {hints[n]}" for p, d, n in symbolic.symbols)
        lines.append("symbols " + ", ".join(named))
    if symbolic.constants:
        lines.append("fixed " + ", ".join(f"arg{p}[{d}] = {n}" for p, d, n in symbolic.constants))
    if symbolic.env.guards:
        lines.append("guards " + "; ".join(render_guard(g) for g in symbolic.env.guards))
    return lines


def print_symbolic(symbolic: SymbolicGraph) -> str:
    """The graph in the text format with sizes as expressions, and its facts after the header.

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> env = ShapeEnv(); n = env.new_symbol(3)
        >>> b = GraphBuilder("f"); x = b.input((3,), "float32"); (y,) = b.node("exp", [x])
        >>> b.output(y); g = b.build()
        >>> print(print_symbolic(SymbolicGraph(g, env, [(0, 0, "s0")], [], {x: (n,), y: (n,)})))
        graph f(%0: float32[s0]) {
          symbols s0 = arg0[0] at 3
          %1: float32[s0] = exp(%0)
          return %1
        }
    """
    view = symbolic_view(symbolic.graph, symbolic.shapes, symbolic.nodes)
    header, _, rest = print_graph(view).partition("\n")
    return "\n".join([header, *(f"  {line}" for line in fact_lines(symbolic)), rest])


_SYMBOL = re.compile(r"(s\d+) = arg(\d+)\[(\d+)\] at (\d+)$")
_FIXED = re.compile(r"arg(\d+)\[(\d+)\] = (\d+)$")


def _facts(lines: list[str]) -> tuple[ShapeEnv, list, list, list]:
    env, symbols, constants, guards = ShapeEnv(), [], [], []
    for line in lines:
        kind, _, body = line.partition(" ")
        parts = [p.strip() for p in body.split("; " if kind == "guards" else ", ")]
        for part in parts:
            if kind == "symbols":
                name, position, dim, hint = _match(_SYMBOL, part).groups()
                if name in env.hints or int(hint) < 2:
                    raise SizeTextError(f"symbol {name} declared twice or at a size below 2")
                env.hints[name] = int(hint)
                symbols.append((int(position), int(dim), name))
            elif kind == "fixed":
                position, dim, size = _match(_FIXED, part).groups()
                constants.append((int(position), int(dim), int(size)))
            else:
                guards.append(parse_guard(part))
    return env, symbols, constants, guards


def _match(pattern: re.Pattern, text: str) -> re.Match:
    found = pattern.match(text)
    if found is None:
        raise SizeTextError(f"{text!r} is not of the form {pattern.pattern!r}")
    return found


def symbols_in(poly: tuple) -> set[str]:
    """The symbols a polynomial uses (inside floor divisions and remainders too).

    Example:
        >>> sorted(symbols_in(parse_size("(s1 - 3)//2*s0 + 1")))
        ['s0', 's1']
    """
    found = set()
    for monomial, _ in poly:
        for atom in monomial:
            found |= {atom[1]} if atom[0] == "sym" else symbols_in(atom[1])
    return found


class _Reader:
    """Reads one size expression into a SymInt/SymFloat of ``env`` (declared symbols only)."""

    def __init__(self, env: ShapeEnv) -> None:
        self.env = env

    def sym_int(self, text: str) -> Any:
        poly = parse_size(text)
        unknown = symbols_in(poly) - self.env.hints.keys()
        if unknown:
            raise SizeTextError(f"{text!r} uses undeclared symbols {sorted(unknown)}")
        value = constant_of(poly)
        return (
            value if value is not None else SymInt(poly, evaluate(poly, self.env.hints), self.env)
        )

    def __call__(self, text: str) -> Any:
        if len(text) > MAX_TEXT:
            raise SizeTextError(f"size expression longer than {MAX_TEXT} characters")
        if "/" not in text.replace("//", "") and "." not in text:
            return self.sym_int(text)
        return float_text(text, self.sym_int)


def parse_symbolic(text: str, consts: dict[int, np.ndarray] | None = None) -> SymbolicGraph:
    """Read ``print_symbolic``'s text back: the graph at the hints and its facts.

    Raises:
        GraphParseError: the text is malformed (an expression, a fact line, a graph line).

    Example:
        >>> text = ("graph f(%0: float32[s0]) {\\n  symbols s0 = arg0[0] at 3\\n"
        ...         "  %1: float32[s0*2] = concat(%0, %0)\\n  return %1\\n}")
        >>> parsed = parse_symbolic(text)
        >>> parsed.graph.outputs[0].shape, print_symbolic(parsed) == text
        ((6,), True)
    """
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    facts = [line for line in lines if line.split(" ")[0] in ("symbols", "fixed", "guards")]
    try:
        env, symbols, constants, guards = _facts(facts)
    except SizeTextError as exc:
        raise GraphParseError(f"cannot parse graph text: {exc}") from None
    env.guards.extend(guards)
    rest = "\n".join(line for line in lines if line not in facts)
    graph = parse_graph(rest, consts, _Reader(env))
    concrete = _concrete(graph)
    env.closed = True  # the facts are final: a size turned into a value records nothing more
    return SymbolicGraph(concrete[0], env, symbols, constants, *concrete[1:])


def _concrete(graph: Graph) -> tuple[Graph, dict, dict]:
    """The parsed graph (SymInts in shapes, literals, attributes) at the hints, and the facts."""
    shapes: dict[Value, tuple] = {}
    nodes: dict[Node, NodeFacts] = {}
    mapping: dict[Value, Value] = {}

    def value(v: Value) -> Value:
        if v not in mapping:
            mapping[v] = v
            if has_symbols(v.shape):
                mapping[v] = Value(v.id, hint_of(tuple(v.shape)), v.dtype, v.name)
                shapes[mapping[v]] = tuple(v.shape)
        return mapping[v]

    new_nodes = []
    for node in graph.nodes:
        literals = {i: x for i, x in enumerate(node.inputs) if isinstance(x, SYMBOLIC)}
        inputs = tuple(value(x) if type(x) is Value else hint_of(x) for x in node.inputs)
        symbolic = node.attrs if has_symbols(node.attrs) else None
        outputs = tuple(value(v) for v in node.outputs)
        new = Node(node.op, inputs, outputs, hint_of(node.attrs), node.loc, node.recompute)
        if literals or symbolic is not None:
            nodes[new] = (symbolic, literals)
        new_nodes.append(new)
    concrete = graph.replace(
        inputs=tuple(value(v) for v in graph.inputs),
        state=tuple(value(v) for v in graph.state),
        consts={value(v): a for v, a in graph.consts.items()},
        nodes=tuple(new_nodes),
        outputs=tuple(value(v) for v in graph.outputs),
        updates=tuple((value(s), value(n)) for s, n in graph.updates),
    )
    return concrete, shapes, nodes


_FLOAT_OPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv"}


def float_text(text: str, sym_int: Any) -> Any:
    """A ``SymFloat``'s text (``((0.1*s0)/(s0 - 1))``) back into one: the arithmetic nodes by
    Python's grammar (``ast``: read, never run), each size in it by the size parser.

    Example:
        >>> env = ShapeEnv(); n = env.new_symbol(4)
        >>> f = 0.1 * n / (n - 1)
        >>> g = float_text(f.expr, _Reader(env).sym_int)
        >>> g.expr == f.expr, g.value_for({"s0": 9}) == f.value_for({"s0": 9})
        (True, True)
    """
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise SizeTextError(f"{text!r} is not a float expression") from None
    made = _float_node(tree, text.strip(), sym_int, 0)
    if type(made) is not SymFloat or not made.leaves():
        raise SizeTextError(f"{text!r}: a float expression must hold a symbol")
    return made


def _float_node(node: ast.AST, text: str, sym_int: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise SizeTextError(f"float expression nested deeper than {MAX_DEPTH}: {text!r}")
    if isinstance(node, ast.BinOp) and type(node.op) in _FLOAT_OPS and _floating(node):
        left = _float_node(node.left, text, sym_int, depth + 1)
        right = _float_node(node.right, text, sym_int, depth + 1)
        return SymFloat(_FLOAT_OPS[type(node.op)], left, right)
    literal = _literal(node)
    if literal is not None:
        return literal
    segment = ast.get_source_segment(text, node)
    if segment is None:
        raise SizeTextError(f"{text!r}: cannot read a part of it")
    return sym_int(segment)  # a size: render's grammar, read by the size parser


def _floating(node: ast.AST) -> bool:
    """Whether a subtree is float arithmetic (a true division or a float literal in it)."""
    return any(
        (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div))
        or (isinstance(n, ast.Constant) and type(n.value) is float)
        for n in ast.walk(node)
    )


def _literal(node: ast.AST) -> float | int | None:
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node, sign = node.operand, -1
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return sign * node.value
    return None
