"""The value-changing rules of the passes, each with its documented bound (docs/passes.md).

Every other rewrite preserves every value's bits (NaN payloads aside) and memory layout. Two do
not: ``fused_sum`` (``fuse`` adds a full sum's elements in float64 lanes, eager numpy sums in the
element type, pairwise) and ``fold_bn`` (reassociates an eval batch norm into the weights).
``sites(name, before, after)`` names the values a pass computed by a rule and gives, for each, the
largest difference from the unrewritten graph the rule allows (``dualflow.debug.check_rules``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.kernels.expr.expression import compile_numpy
from dualflow.ops.registry import OPS
from dualflow.passes.fold_bn import folds_and_producers

Lookup = Callable[[Value], Any]  # a value of the graph before the pass (eager's, in checks)


@dataclass(frozen=True)
class Rule:
    """A documented value-changing rewrite: the pass that applies it and its bound."""

    name: str
    passes: tuple[str, ...]
    summary: str
    bound: str


RULES: dict[str, Rule] = {
    "fused_sum": Rule(
        "fused_sum",
        ("fuse",),
        "a full sum fused with its elementwise region adds the elements in float64 (numba lanes "
        "or blocked chunks) where eager numpy sums them in their own type, pairwise",
        "|fused - eager| <= (g(De, u) + g(Df, 2^-53) + u) * sum_i |x_i| with n elements, "
        "g(k, u) = k u / (1 - k u), De = ceil(n / 8192) + ceil(log2 n) + 32, "
        "Df = ceil(n / 4096) + ceil(log2 n) + 160; exact for integers",
    ),
    "fold_bn": Rule(
        "fold_bn",
        ("fold_bn",),
        "((conv2d|matmul)(x, w) [+ b]) * s + t is computed as "
        "(conv2d|matmul)(x, w * s) + (b s + t)",
        "|folded - unfolded| <= 2 g(K + 3, u) (|s| sum_k |x_k w_k| + |b s| + |t|), K products "
        "per output",
    ),
}


@dataclass(frozen=True)
class Site:
    """A value a pass computes by ``rule``; ``allowed(lookup)`` is the largest |difference| per
    element (an array broadcasting to the value, or a float) from the values before the pass."""

    rule: str
    value: Value
    allowed: Callable[[Lookup], Any]


def unit_roundoff(dtype: Any) -> float:
    """u of a float dtype (2^-24 for float32, 2^-53 for float64); 0 for integers and bool.

    Example:
        >>> unit_roundoff("float32") == 2.0**-24, unit_roundoff("int64")
        (True, 0.0)
    """
    dtype = np.dtype(dtype)
    return float(np.finfo(dtype).eps) / 2 if dtype.kind in "fc" else 0.0


def gamma(k: float, u: float) -> float:
    """Higham's ``k u / (1 - k u)``: the relative error bound of ``k`` rounded operations.

    Example:
        >>> round(gamma(10, 2.0**-24) / 2.0**-24, 6)
        10.000006
    """
    return math.inf if k * u >= 1 else k * u / (1 - k * u)


def sum_bound(n: int, dtype: Any) -> float:
    """The ``fused_sum`` factor: |fused - eager| <= sum_bound(n, dtype) * sum_i |x_i|.

    Eager numpy sums ``n`` contiguous elements pairwise (8 accumulators per 128-element leaf:
    depth 25; one level per halving; 8192-element buffers added in sequence), so an element
    goes through at most ``De`` roundings; the fused kernels add in float64 (64 lanes of at most
    64 elements, folded in sequence every 4096 elements; or blocked chunks) and round once to
    the result type.

    Example:
        >>> f"{sum_bound(4096, 'float32') / 2.0**-24:.1f}"
        '46.0'
    """
    u = unit_roundoff(dtype)
    if u == 0.0 or n <= 1:
        return 0.0
    log = math.ceil(math.log2(n))
    eager = gamma(math.ceil(n / 8192) + log + 32, u)
    fused = gamma(math.ceil(n / 4096) + log + 160, 2.0**-53)
    return eager + fused + (u if u > 2.0**-53 else 0.0)


def _fused_sum_site(node: Node) -> Site:
    names, expr = node.attrs["args"], node.attrs["expr"]
    elements = compile_numpy(expr, names, ())

    def allowed(lookup: Lookup) -> float:
        args = [lookup(v) for v in node.inputs]
        with np.errstate(all="ignore"):
            values = np.asarray(elements(np, *args))
        total = float(np.sum(np.abs(values), dtype=np.float64)) if values.dtype.kind in "fc" else 0
        return sum_bound(values.size, node.outputs[0].dtype) * total

    return Site("fused_sum", node.outputs[0], allowed)


def _fold_bn_site(match: Any, producers: dict[Value, Node]) -> Site:
    core = match.core
    x, w = core.inputs
    products = int(np.prod(w.shape[1:])) if core.op == "conv2d" else int(w.shape[0])
    out = match.tail.outputs[0]
    factor = 2 * gamma(products + 3, unit_roundoff(out.dtype))

    def allowed(lookup: Lookup) -> np.ndarray:
        value = _through(lookup, producers)  # a chained fold's core reads a folded weight
        s, t = np.abs(value(match.scale)), np.abs(value(match.shift))
        dots = OPS[core.op].forward(np, np.abs(value(x)), np.abs(value(w)), **core.attrs)
        magnitude = s * dots + t
        if match.bias is not None:
            magnitude = magnitude + np.abs(value(match.bias) * value(match.scale))
        return factor * magnitude.astype(np.float64)

    return Site("fold_bn", out, allowed)


def _through(lookup: Lookup, producers: dict[Value, Node]) -> Lookup:
    """``lookup``, and for a value only the fold's rewrite made (the graphs on either side of the
    pass need not hold it) its producer's result, computed from values ``lookup`` knows."""
    made: dict[Value, Any] = {}

    def value(v: Value) -> Any:
        if v in made:
            return made[v]
        try:
            return lookup(v)
        except KeyError:
            node = producers[v]
            args = [value(u) if isinstance(u, Value) else u for u in node.inputs]
            made[v] = OPS[node.op].forward(np, *args, **node.attrs)
            return made[v]

    return value


def sites(name: str, before: Graph, after: Graph) -> dict[Value, Site]:
    """The values of ``after`` (the result of pass ``name`` on ``before``) that a value-changing
    rule computes differently, with their bounds; empty for every pass that preserves bits.

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> from dualflow.passes.fuse import fuse
        >>> b = GraphBuilder("f"); x = b.input((64, 64), "float32")
        >>> (h,) = b.node("multiply", [x, x])
        >>> (s,) = b.node("sum", [h], {"axis": None, "keepdims": False}); b.output(s)
        >>> g = b.build(); [site.rule for site in sites("fuse", g, fuse(g)).values()]
        ['fused_sum']
    """
    found: dict[Value, Site] = {}
    if name == "fuse":
        for node in after.nodes:
            if OPS[node.op].region and node.attrs.get("reduce") == "sum":  # fuse's own nodes
                found[node.outputs[0]] = _fused_sum_site(node)
    elif name == "fold_bn":
        matches, producers = folds_and_producers(before)
        for match in matches:
            found[match.tail.outputs[0]] = _fold_bn_site(match, producers)
    return found
