"""``parse_graph``: read the canonical text format written by ``print_graph`` back into a Graph.

Constant arrays are not part of the text; pass them (by value id) when parsing a saved graph.
Malformed text raises ``GraphParseError`` naming the line. With ``sizes`` (a reader of one size
expression, ``symbolic_text``), shapes, literals and attributes may hold size expressions
(``float32[s0,20]``, ``{shape=(s0*2, -1)}``): each is handed to ``sizes`` as text, never evaluated.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from dualflow.errors import CompileError
from dualflow.graph_ir.ir import Graph, Node, Value

_DECL = re.compile(r'%(\d+): (\w+)\[([^\]]*)\](?: "((?:[^"\\]|\\.)*)")?')
# a value reference; a remainder's ``)%3`` (a size expression) is not one
_REF = re.compile(r"(?<![\w)\]])%(\d+)")
_HEADER = re.compile(r"graph (\S+)\((.*)\) \{$")
_LOC = re.compile(r"  # ([^#'\"{}]+:\d+)$")
_UPDATE = re.compile(r"update %(\d+) <- %(\d+)$")


class GraphParseError(CompileError):
    """The text is not in the canonical graph format."""


def parse_literal(text: str) -> Any:
    """Parse one attribute/literal written by ``format_literal``.

    Example:
        >>> parse_literal("(1, slice(None, 2, None), ..., -inf)")
        (1, slice(None, 2, None), Ellipsis, -inf)
    """
    return _evaluate(ast.parse(text.strip(), mode="eval").body, {})


class _Sizes:
    """Size expressions inside one parsed text: each is read from its source text by ``read``
    (``ast`` only finds where it is; Python's precedence is not the size grammar's)."""

    def __init__(self, source: str, read: Callable[[str], Any]) -> None:
        self.source, self.read = source, read

    def __call__(self, node: ast.AST) -> Any:
        return self.read(ast.get_source_segment(self.source, node))


def _evaluate(node: ast.AST, values: Any, sizes: _Sizes | None = None) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple):
        return tuple(_evaluate(e, values, sizes) for e in node.elts)
    if isinstance(node, ast.List):
        return [_evaluate(e, values, sizes) for e in node.elts]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand, values, sizes)
    if isinstance(node, ast.Name):
        named = {
            "inf": float("inf"),
            "nan": float("nan"),
            "None": None,
            "True": True,
            "False": False,
        }
        if node.id in named:
            return named[node.id]
        if node.id in values:
            return values[node.id]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        args = [_evaluate(a, values) for a in node.args]
        if node.func.id == "slice":
            return slice(*args)
        if node.func.id == "array":
            array = np.array(args[0], dtype=args[1])
            return array.reshape(args[2]) if len(args) > 2 else array
    if sizes is not None and isinstance(node, ast.BinOp | ast.Name):
        return sizes(node)
    raise ValueError(f"not a literal: {ast.unparse(node)}")


def _decls(text: str, size: Callable[[str], Any] = int) -> list[Value]:
    return [
        Value(int(i), tuple(size(d) for d in shape.split(",") if d), dtype, _unquote(name) or None)
        for i, dtype, shape, name in _DECL.findall(text)
    ]


def _unquote(name: str) -> str:
    return re.sub(r"\\(.)", r"\1", name)


def _split_call(text: str) -> tuple[str, str]:
    """Split ``op(args) {attrs}`` into the call and the attrs text (without braces)."""
    depth = 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if ch == ")" and depth == 0:
            rest = text[i + 1 :].strip()
            if rest and not (rest.startswith("{") and rest.endswith("}")):
                raise ValueError(f"unexpected text after the call: {rest!r}")
            return text[: i + 1], rest[1:-1]
    raise ValueError("unbalanced parentheses")


class _ValueScope:
    """``_v12`` -> values[12]: a view, since a dict per node made parsing quadratic."""

    def __init__(self, values: dict[int, Value]) -> None:
        self.values = values

    def __contains__(self, name: str) -> bool:
        return name[:2] == "_v" and name[2:].isdigit() and int(name[2:]) in self.values

    def __getitem__(self, name: str) -> Value:
        return self.values[int(name[2:])]


def _parse_node(
    text: str, values: dict[int, Value], read: Callable[[str], Any] | None = None
) -> Node:
    located = _LOC.search(text)  # the location is last: attr strings may hold "  # " too
    body, loc = (text[: located.start()], located.group(1)) if located else (text, "")
    outputs: list[Value] = []
    if body.startswith("%"):
        decls, _, body = body.partition(" = ")
        outputs = _decls(decls, read or int)
    recompute = body.startswith("recompute ")
    call, attrs_text = _split_call(body.removeprefix("recompute "))
    scope = _ValueScope(values)
    source = _REF.sub(r"_v\1", call)
    tree = ast.parse(source, mode="eval").body
    if not isinstance(tree, ast.Call) or not isinstance(tree.func, ast.Name):
        raise ValueError(f"not an op call: {call!r}")
    sizes = None if read is None else _Sizes(source, read)
    inputs = tuple(_evaluate(a, scope, sizes) for a in tree.args)
    attrs: dict[str, Any] = {}
    if attrs_text:
        source = f"f({attrs_text})"
        keywords = ast.parse(source, mode="eval").body.keywords
        sizes = None if read is None else _Sizes(source, read)
        attrs = {k.arg: _evaluate(k.value, {}, sizes) for k in keywords}
    return Node(tree.func.id, inputs, tuple(outputs), attrs, loc or None, recompute)


def parse_graph(
    text: str,
    consts: dict[int, np.ndarray] | None = None,
    sizes: Callable[[str], Any] | None = None,
) -> Graph:
    """Parse the canonical text; ``consts`` maps constant value ids to their arrays; ``sizes``
    reads a size expression's text (dimensions, literals and attributes that are not plain).

    Example:
        >>> g = parse_graph('graph f(%0: float32[2] "x") {\\n  %1: float32[2] = exp(%0)\\n'
        ...                 '  return %1\\n}')
        >>> g.nodes[0].op, g.outputs[0].shape
        ('exp', (2,))
    """
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    try:
        return _parse_lines(lines, consts or {}, sizes)
    except (ValueError, KeyError, SyntaxError, IndexError) as exc:
        raise GraphParseError(f"cannot parse graph text: {exc}") from None


def _parse_lines(
    lines: list[str], consts: dict[int, np.ndarray], read: Callable[[str], Any] | None
) -> Graph:
    header = _HEADER.match(lines[0])
    if header is None or lines[-1] != "}":
        raise ValueError(f"line 1 must be 'graph NAME(...) {{' and the last '}}': {lines[0]!r}")
    inputs = _decls(header.group(2), read or int)
    values = {v.id: v for v in inputs}
    state: list[Value] = []
    const_values: dict[Value, np.ndarray] = {}
    nodes, outputs, updates = [], [], []
    for number, line in enumerate(lines[1:-1], start=2):
        try:
            if line.startswith("state "):
                state.extend(_decls(line, read or int))
                values.update({v.id: v for v in state})
            elif line.startswith("const "):
                (v,) = _decls(line, read or int)
                values[v.id] = v
                const_values[v] = consts.get(v.id, np.zeros(v.shape, v.dtype))
            elif line.startswith("return"):
                outputs = [values[int(i)] for i in re.findall(r"%(\d+)", line)]
            elif line.startswith("update "):
                s, n = _UPDATE.match(line).groups()
                updates.append((values[int(s)], values[int(n)]))
            else:
                node = _parse_node(line, values, read)
                nodes.append(node)
                values.update({v.id: v for v in node.outputs})
        except (ValueError, KeyError, SyntaxError, AttributeError) as exc:
            raise ValueError(f"line {number}: {line!r}: {exc}") from None
    name = header.group(1)
    return Graph(
        name,
        tuple(inputs),
        tuple(state),
        const_values,
        tuple(nodes),
        tuple(outputs),
        tuple(updates),
    )
