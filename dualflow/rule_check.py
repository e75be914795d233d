"""Rounding or bug? Check a pipeline's rewrites node by node against the documented rules.

``check_rules`` runs the passes one at a time and computes every node a pass added or changed the
way the plan does (fused nodes with the runtime's kernels) from the values before the pass. A
node a value-changing rule computes (``passes/rules.py``) must lie within the rule's bound, any
other node must have the same bits: a ``RuleCheck`` with ``within=False`` is a bug, not rounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dualflow.graph_ir.interpret import guard_holds, run_node
from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.ops.registry import OPS
from dualflow.passes.manager import resolve_passes, run_passes
from dualflow.passes.rules import Site, sites
from dualflow.runtime.out_forward import node_kernel


@dataclass(frozen=True)
class RuleCheck:
    """A node a pass rewrote, computed as the plan does from the values before the pass."""

    stage: str  # the pass
    rules: tuple[str, ...]  # the value-changing rules that compute it (none: must be exact)
    node: str  # describe_node of the rewritten node
    max_abs: float  # largest |difference| from the value before the pass
    bound: float  # largest difference the rules allow (0 without a rule)
    within: bool

    def __str__(self) -> str:
        rule = ", ".join(self.rules) or "no value-changing rule (must be bit-identical)"
        verdict = "within the bound" if self.within else "OUTSIDE the bound"
        return (
            f"{self.node} [pass {self.stage}; {rule}]: max |diff| {self.max_abs:.3g}, "
            f"bound {self.bound:.3g}: {verdict}"
        )


def environment(graph: Graph, inputs: list[Any], state: list[Any]) -> dict[Value, Any]:
    """Every value the graph computes, node by node (as ``interpret`` does, keeping them all);
    ``assign`` writes into copies of the state."""
    env: dict[Value, Any] = dict(zip(graph.inputs, inputs))
    env.update(zip(graph.state, (np.array(s, copy=True) for s in state)))
    env.update(graph.consts)
    for node in graph.nodes:
        args = [env[v] if isinstance(v, Value) else v for v in node.inputs]
        if OPS[node.op].guard:
            guard_holds(node, args[0])
            continue
        env.update(zip(node.outputs, run_node(node, args)))
    return env


def describe_node(node: Node) -> str:
    """One line naming a node: its op, output values and source line(s).

    Example:
        >>> print(describe_node(Node("exp", (Value(0, (2,), "float32"),), (Value(1, (2,), "float32"),), loc="m.py:3")))
        exp -> %1 at m.py:3
    """  # noqa: E501
    outs = ", ".join(f"%{v.id}" for v in node.outputs)
    text = f"{node.op} -> {outs} at {node.loc or '?'}"
    locs = node.attrs.get("locs") if OPS[node.op].region else None
    return text + (f" (fuses {', '.join(locs)})" if locs else "")


def same_bits(a: Any, b: Any) -> bool:
    """Whether two arrays have the same shape, dtype and bits (any NaN equals any NaN).

    Example:
        >>> same_bits(np.float32([0.0, np.nan]), np.float32([-0.0, np.nan]))
        False
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind not in "fc":
        return bool(np.array_equal(a, b))
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if not np.array_equal(nan_a, nan_b):
        return False
    return np.ascontiguousarray(a[~nan_a]).tobytes() == np.ascontiguousarray(b[~nan_b]).tobytes()


def _run_like_plan(node: Node, args: list[Any]) -> tuple[Any, ...]:
    """A node's outputs as a plan computes them (fused nodes with the runtime's kernels)."""
    op = OPS[node.op]
    if op.node_kernel is not None:
        return (np.asarray(node_kernel(node)(np, *args)),)
    if op.state_write:  # write a copy: the state the caller passed stays as it was
        args = [np.array(args[0], copy=True), *args[1:]]
    return run_node(node, args)


def _judge(stage: str, node: Node, site: Site | None, got: Any, want: Any, lookup) -> RuleCheck:
    """How far ``got`` is from ``want`` and whether ``site``'s rule (or, without one, bit
    equality) allows it."""
    got, want = np.asarray(got), np.asarray(want)
    numeric = got.dtype.kind in "biufc" and want.dtype.kind in "biufc"
    with np.errstate(all="ignore"):
        a, b = got.astype(np.float64), want.astype(np.float64)
        same = (a == b) | (np.isnan(a) & np.isnan(b)) if numeric else got == want
        diff = np.where(same, 0.0, np.abs(a - b)) if numeric else np.where(same, 0.0, np.inf)
    diff = np.where(np.isnan(diff), np.inf, diff)
    if site is None:
        allowed, within = 0.0, same_bits(got, want)
    else:
        allowed = np.asarray(site.allowed(lookup), dtype=np.float64)
        within = bool(np.all(same | (diff <= allowed) | ~np.isfinite(allowed)))
    return RuleCheck(
        stage,
        (site.rule,) if site is not None else (),
        describe_node(node),
        float(diff.max(initial=0.0)),
        float(np.max(allowed, initial=0.0)),
        within,
    )


def _check_pass(
    name: str, before: Graph, after: Graph, inputs: list, state: list
) -> list[RuleCheck]:
    reference = environment(before, inputs, state)
    computed: dict[Value, Any] = dict(zip(after.inputs, inputs))
    computed.update(zip(after.state, state))
    computed.update(after.consts)

    def lookup(v: Value) -> Any:
        return reference[v] if v in reference else computed[v]

    rules, unchanged = sites(name, before, after), {id(n) for n in before.nodes}
    checks = []
    for node in after.nodes:
        if OPS[node.op].guard or id(node) in unchanged:
            continue  # an untouched node computes exactly what it did before the pass
        outs = _run_like_plan(node, [lookup(v) if isinstance(v, Value) else v for v in node.inputs])
        computed.update(zip(node.outputs, outs))
        for v, got in zip(node.outputs, outs):
            site = rules.get(v)
            if v in reference and (site is not None or not same_bits(got, reference[v])):
                checks.append(_judge(name, node, site, got, reference[v], lookup))
    return checks


def check_rules(
    graph: Graph, inputs: list, state: list, passes: str | Sequence[str] | None = None
) -> list[RuleCheck]:
    """Check a pipeline's rewrites of ``graph`` (as traced) on these inputs, pass by pass.

    Each node a pass added or changed is computed as the plan would (fused nodes by the runtime's
    kernels) from the values before the pass, which the reference interpreter computes as eager
    does. A node that a value-changing rule computes (``passes/rules.py``) must be within the
    rule's bound, any other node bit-identical. Returns one check per rule node and per node
    that differs without a rule; a check with ``within=False`` is a bug, not rounding.

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((64, 64), "float32")
        >>> (h,) = b.node("multiply", [x, 3.0])
        >>> b.output(*b.node("sum", [h], {"axis": None, "keepdims": False}))
        >>> xs = [np.random.default_rng(0).normal(size=(64, 64)).astype(np.float32)]
        >>> [(c.rules, c.within) for c in check_rules(b.build(), xs, [], "O2")]
        [(('fused_sum',), True)]
    """
    checks = []
    for name in resolve_passes(passes if passes is None or isinstance(passes, str) else [*passes]):
        after, _ = run_passes(graph, (name,))
        if after is not graph:
            checks += _check_pass(name, graph, after, inputs, state)
        graph = after
    return checks
