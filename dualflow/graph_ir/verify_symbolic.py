"""``verify_symbolic``: the checks of ``verify`` plus those of a graph's sizes as expressions.

For a ``SymbolicGraph`` (a concrete graph at the traced sizes and the facts that make it serve
other sizes): every symbol an expression uses is bound to an argument dimension; each symbolic
shape, literal and attribute is the concrete one at the hints; and each node's op ``infer``,
run on the symbolic input shapes, gives the recorded symbolic output shapes (equal polynomials)
and depends on no relation between sizes that the graph's guards leave out. A mismatch raises
``GraphVerifyError`` naming the node and both shapes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.errors import DualflowError
from dualflow.graph_ir.ir import Node, Value
from dualflow.graph_ir.symbolic_text import SymbolicGraph, symbols_in
from dualflow.graph_ir.verify import GraphVerifyError, _fail, verify
from dualflow.ops.registry import OPS, Meta
from dualflow.size_expressions import const, render, render_guard
from dualflow.symbolic_containers import hint_of, map_symbols
from dualflow.symbolic_shapes import ShapeEnv, SymFloat, SymInt


def _polys(shape: Any) -> list:
    return [d.poly if isinstance(d, SymInt) else const(int(d)) for d in shape]


def _text(shape: Any) -> str:
    return "[" + ",".join(render(p) for p in _polys(shape)) + "]"


def _used(value: Any, found: set[str]) -> None:
    def note(s: Any) -> Any:
        for size in s.leaves() if isinstance(s, SymFloat) else [s]:
            found.update(symbols_in(size.poly))
        return s

    map_symbols(value, note)


def _check_symbols(symbolic: SymbolicGraph) -> None:
    declared = [name for _, _, name in symbolic.symbols]
    if len(set(declared)) != len(declared) or set(declared) != set(symbolic.env.hints):
        raise _fail(
            None,
            f"symbols {declared} do not match the traced sizes {symbolic.env.hints}",
            "declare each symbol once, bound to one argument dimension",
        )
    used: set[str] = set()
    for shape in symbolic.shapes.values():
        _used(shape, used)
    for attrs, literals in symbolic.nodes.values():
        _used((attrs, literals), used)
    for poly, _, _ in symbolic.env.guards:
        used |= symbols_in(poly)
    if used - set(declared):
        raise _fail(
            None,
            f"sizes use symbols {sorted(used - set(declared))} no argument dimension binds",
            "bind every symbol to an input dimension (symbols line)",
        )


def _rebound(value: Any, env: ShapeEnv) -> Any:
    """``value`` with its SymInts in ``env`` (what infer's comparisons record goes there)."""

    def move(s: Any) -> Any:
        if isinstance(s, SymFloat):
            return s.rebuilt(lambda i: SymInt(i.poly, i.hint, env))
        return SymInt(s.poly, s.hint, env)

    return map_symbols(value, move)


def _check_hints(symbolic: SymbolicGraph, node: Node) -> None:
    for value in node.outputs:
        shape = symbolic.shapes.get(value)
        if shape is not None and tuple(hint_of(tuple(shape))) != value.shape:
            raise _fail(
                node,
                f"output %{value.id} is {_text(shape)}, which is {list(hint_of(tuple(shape)))} "
                f"at {symbolic.env.hints}, not its traced shape {list(value.shape)}",
                "record the symbolic shape the trace computed",
            )
    attrs, literals = symbolic.nodes.get(node, (None, {}))
    if attrs is not None and hint_of(attrs) != node.attrs:
        raise _fail(node, "symbolic attributes differ from the traced ones", "record both alike")
    for i, literal in literals.items():
        if hint_of(literal) != node.inputs[i]:
            raise _fail(node, f"symbolic literal {i} differs from the traced one", "record both")


def _check_node(symbolic: SymbolicGraph, node: Node, env: ShapeEnv) -> None:
    """Infer reads what the trace's infer read: a value's recorded expressions, else its
    traced shape (a trace records expressions only where an op touched one; a value it holds
    concretely but infer finds symbolic is left so: ``instantiate`` recomputes every shape)."""
    _check_hints(symbolic, node)
    op = OPS[node.op]
    if op.check_node is not None or not node.outputs:
        return
    attrs, _ = symbolic.nodes.get(node, (None, {}))
    metas = [
        Meta(_rebound(symbolic.shapes.get(v, v.shape), env), np.dtype(v.dtype))
        if type(v) is Value
        else Meta((), type(v))
        for v in node.inputs
    ]
    before = len(env.guards)
    try:
        inferred = op.infer(*metas, **_rebound(node.attrs if attrs is None else attrs, env))
    except (DualflowError, TypeError, ValueError) as exc:
        raise _fail(node, f"infer rejects the symbolic sizes: {exc}", "fix the facts") from None
    for meta, value in zip(inferred, node.outputs):
        recorded = symbolic.shapes.get(value)
        if recorded is None and tuple(hint_of(tuple(meta.shape))) == value.shape:
            continue
        recorded = value.shape if recorded is None else recorded
        if len(meta.shape) != len(recorded) or _polys(meta.shape) != _polys(recorded):
            raise _fail(
                node,
                f"output %{value.id} is recorded as {value.dtype}{_text(recorded)} but infer "
                f"gives {np.dtype(meta.dtype).name}{_text(meta.shape)} from the symbolic inputs",
                "recompute the symbolic shapes with the op's infer",
            )
    if len(env.guards) > before:
        raise _fail(
            node,
            f"infer depends on {render_guard(env.guards[before])}, which the guards leave out",
            "record the guards the trace's infer made",
        )


def verify_symbolic(symbolic: SymbolicGraph) -> SymbolicGraph:
    """Check ``symbolic``'s graph (``verify``) and its sizes as expressions; returns it.

    Raises:
        GraphVerifyError: a broken invariant, naming the node and the shapes.

    Example:
        >>> from dualflow.graph_ir.symbolic_text import parse_symbolic
        >>> text = ("graph f(%0: float32[s0]) {\\n  symbols s0 = arg0[0] at 3\\n"
        ...         "  %1: float32[s0] = exp(%0)\\n  return %1\\n}")
        >>> verify_symbolic(parse_symbolic(text)).graph.name
        'f'
        >>> bad = parse_symbolic(text.replace("[s0] = exp", "[s0*2 - 3] = exp"))  # 3 at s0=3
        >>> try:
        ...     verify_symbolic(bad)
        ... except GraphVerifyError as exc:
        ...     print(str(exc).splitlines()[0][:60])
        output %1 is recorded as float32[s0*2 - 3] but infer gives f
    """
    verify(symbolic.graph)
    _check_symbols(symbolic)
    env = ShapeEnv(dict(symbolic.env.hints), list(symbolic.env.guards))
    for value in symbolic.graph.inputs:
        shape = symbolic.shapes.get(value)
        if shape is not None and tuple(hint_of(tuple(shape))) != value.shape:
            raise _fail(None, f"input %{value.id} {_text(shape)} is not {list(value.shape)}", "")
    for node in symbolic.graph.nodes:
        _check_node(symbolic, node, env)
    return symbolic


__all__ = ["GraphVerifyError", "verify_symbolic"]
