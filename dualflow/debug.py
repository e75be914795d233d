"""Mode-differential checker: run a function eagerly in float64 and compiled, compare the results.

On a mismatch every pass of the pipeline is disabled in turn to name the culprit pass, and the
forward graphs with and without it are interpreted side by side to name the first differing node.
``check_rules`` tells rounding from bugs: every node a pass rewrote, computed as the plan does,
must equal eager's value bit for bit unless a documented rule (``passes/rules.py``) applies to it,
and then lie within that rule's bound; ``compare_modes`` reports it for a mismatch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import dualflow
from dualflow.graph_ir.ir import Graph
from dualflow.ops.host_print import debug_print
from dualflow.passes.manager import resolve_passes, run_passes
from dualflow.rule_check import RuleCheck, check_rules, describe_node, environment, same_bits
from dualflow.tensor.core import Tensor
from dualflow.tracer.signature import flatten

__all__ = ["Report", "RuleCheck", "check_rules", "compare_modes", "describe_node", "same_bits"]

TOLERANCES = {"float32": (1e-4, 1e-5), "float64": (1e-10, 1e-10), "float16": (1e-2, 1e-3)}


@dataclass
class Report:
    """The outcome of ``compare_modes``: differences, and who is to blame when they are too big."""

    ok: bool
    max_abs: float
    max_rel: float
    worst: str = ""  # which quantity differs most, e.g. "order 1, grad of argument 0"
    culprit_pass: str | None = None
    culprit_node: str | None = None
    passes: tuple[str, ...] = ()
    rules: tuple[RuleCheck, ...] = ()  # on a mismatch: check_rules on the call's graphs
    nonfinite: str = ""  # the first quantity whose eager reference itself holds NaN or Inf

    @property
    def culprit_rules(self) -> tuple[RuleCheck, ...]:
        """The rule checks of the culprit node (empty: no rule covers it, or no culprit)."""
        if self.culprit_node is None:
            return ()
        return tuple(c for c in self.rules if self.culprit_node.startswith(c.node))

    @property
    def within_rules(self) -> bool | None:
        """On a mismatch: True when every node the passes changed is within its rule's bound
        (the difference is rounding), False when one is not (a bug), None when none changed."""
        return all(c.within for c in self.rules) if self.rules else None

    def __str__(self) -> str:
        head = "modes match" if self.ok else "MISMATCH"
        lines = [
            f"{head}: max abs {self.max_abs:.3g}, max rel {self.max_rel:.3g}"
            + (f" ({self.worst})" if self.worst else ""),
            f"passes: {', '.join(self.passes) or '(none)'}",
        ]
        if not self.ok:
            lines.append(f"culprit pass: {self.culprit_pass or 'not found'}")
            lines.append(f"culprit node: {self.culprit_node or 'not found'}")
            lines += [f"rule check: {c}" for c in self.rules]
            lines.append(_verdict(self))
        if self.nonfinite:
            lines.append(
                f"note: the eager float64 reference holds {self.nonfinite}: the function makes "
                "it, not the compiler; dualflow.set_debug(True) names the op and line"
            )
        return "\n".join(lines)


def _verdict(report: Report) -> str:
    if report.within_rules is None:
        return "verdict: no pass changed a value (compare O0 with eager in the same dtype)"
    if not report.within_rules:
        return "verdict: a difference no documented rule explains: a bug, not rounding"
    return "verdict: every difference is a documented rule within its bound (rounding)"


def _is_float(arg: Any) -> bool:
    array = arg.raw_array if isinstance(arg, Tensor) else arg
    return isinstance(array, np.ndarray) and array.dtype.kind == "f"


def _leaves(args: tuple, dtype: Any | None) -> tuple[list[Any], list[Tensor]]:
    """Fresh copies of the arguments (float ones as grad-requiring tensors, cast to ``dtype``)."""
    out, wrt = [], []
    for arg in args:
        if not _is_float(arg):
            out.append(arg)
            continue
        array = np.array(arg.numpy() if isinstance(arg, Tensor) else arg, dtype=dtype, copy=True)
        t = dualflow.tensor(array, requires_grad=True)
        out.append(t)
        wrt.append(t)
    return out, wrt


def _flat_outputs(result: Any) -> list[Tensor]:
    if isinstance(result, Tensor):
        return [result]
    if isinstance(result, dict):
        return [t for v in result.values() for t in _flat_outputs(v)]
    if isinstance(result, (list, tuple)):
        return [t for v in result for t in _flat_outputs(v)]
    return []


def _total(terms: list[Tensor]) -> Tensor:
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


def _evaluate(fn: Callable, args: tuple, kwargs: dict, dtype: Any, orders: Sequence[int]) -> dict:
    """Named float64 arrays: outputs (order 0), first and second order gradients."""
    leaves, wrt = _leaves(args, dtype)
    with dualflow.enable_grad():
        outs = _flat_outputs(fn(*leaves, **kwargs))
        found: dict[str, np.ndarray] = {
            f"order 0, output {i}": o.numpy().astype(np.float64) for i, o in enumerate(outs)
        }
        if not wrt or not any(o.requires_grad for o in outs) or max(orders) < 1:
            return found
        total = _total([o.sum() for o in outs if o.requires_grad])
        # Order 1 without create_graph: that is what runs a compiled call's backward plan
        # (create_graph differentiates an eager replay instead, which would hide its bugs).
        grads = dualflow.grad(total, wrt, retain_graph=2 in orders, allow_unused=True)
        if 1 in orders:
            for i, g in enumerate(grads):
                if g is not None:
                    found[f"order 1, grad of argument {i}"] = g.numpy().astype(np.float64)
        if 2 in orders:
            grads = dualflow.grad(total, wrt, create_graph=True, allow_unused=True)
        used = [g for g in grads if g is not None and g.requires_grad]
        if 2 in orders and used:
            penalty = _total([(g * g).sum() for g in used])
            second = dualflow.grad(penalty, wrt, allow_unused=True)
            for i, g in enumerate(second):
                if g is not None:
                    found[f"order 2, grad of argument {i}"] = g.numpy().astype(np.float64)
    return found


def _difference(ref: dict, got: dict, rtol: float, atol: float) -> tuple[bool, float, float, str]:
    ok, max_abs, max_rel, worst = set(ref) == set(got), 0.0, 0.0, ""
    for key in ref.keys() & got.keys():
        a, b = ref[key], got[key]
        if a.shape != b.shape:
            return False, float("inf"), float("inf"), f"{key}: shape {b.shape} != {a.shape}"
        with np.errstate(invalid="ignore"):  # the same NaN/Inf in both modes is no difference
            diff = np.where((a == b) | (np.isnan(a) & np.isnan(b)), 0.0, np.abs(a - b))
        abs_err = float(diff.max(initial=0.0))
        scale = np.abs(np.where(np.isfinite(a), a, 0.0))
        rel = float((diff / np.maximum(scale, np.finfo(np.float64).tiny)).max(initial=0.0))
        ok = ok and bool(np.all(diff <= atol + rtol * scale)) and bool(np.isfinite(abs_err))
        if abs_err >= max_abs:
            max_abs, worst = abs_err, key
        max_rel = max(max_rel, rel)
    return ok, max_abs, max_rel, worst


def _kind(array: np.ndarray) -> str:
    return "" if np.isfinite(array).all() else "NaN" if np.isnan(array).any() else "Inf"


def _tolerance(args: tuple) -> tuple[float, float]:
    dtypes = [
        str((a.raw_array if isinstance(a, Tensor) else a).dtype) for a in args if _is_float(a)
    ]
    return max((TOLERANCES.get(d, (1e-4, 1e-5)) for d in dtypes), default=(1e-10, 1e-10))


def _run_compiled(fn: Callable, args: tuple, kwargs: dict, passes: tuple, orders: Sequence[int]):
    compiled = dualflow.compile(fn, passes=passes, fallback="error")
    _evaluate(compiled, args, kwargs, None, orders)  # the first call traces (and runs eagerly)
    return compiled, _evaluate(compiled, args, kwargs, None, orders)


def _first_difference(
    graph: Graph, inputs: list, state: list, pipeline: tuple, culprit: str, tol: tuple
) -> str | None:
    """The first node of ``graph`` after ``pipeline`` whose output differs from the same value
    computed by the pipeline without ``culprit``."""
    bad, _ = run_passes(graph, pipeline)
    good, _ = run_passes(graph, tuple(p for p in pipeline if p != culprit))
    bad_env, good_env = environment(bad, inputs, state), environment(good, inputs, state)
    for node in bad.nodes:
        for v in node.outputs:
            if v in good_env and not np.allclose(bad_env[v], good_env[v], *tol, True):
                return describe_node(node)
    return None


def _raw_graphs(fn: Callable, args: tuple, kwargs: dict) -> list[tuple[Graph, list, list, str]]:
    """The call's graphs as traced (no passes), each with its inputs, state and a suffix naming
    it: the forward graph, then the backward graph fed the forward's saved values and gradients
    of ones (as order 1 is)."""
    raw = dualflow.compile(fn, passes=(), fallback="error")
    leaves, _ = _leaves(args, None)
    with dualflow.enable_grad():
        raw(*leaves, **kwargs)
    if not raw.history:
        return []
    trace = raw.history[-1]
    flat = flatten(tuple(leaves), kwargs, raw._names)
    inputs = [leaf.raw_array if isinstance(leaf, Tensor) else leaf for leaf in flat.leaves]
    state = [ref.read() for ref in trace.checks.refs]
    graphs = [(trace.graph, inputs, state, "")]
    bwd = trace.backward
    if bwd is not None:
        env = environment(trace.graph, inputs, state)
        gys = [np.ones_like(env[trace.graph.outputs[k]]) for k in bwd.grad_outputs]
        bwd_inputs = gys + [env[v] for v in bwd.residuals]
        bwd_state = [ref.read() for ref in bwd.checks.refs]
        graphs.append((bwd.graph, bwd_inputs, bwd_state, " (backward graph)"))
    return graphs


def _culprit_node(graphs: list, pipeline: tuple[str, ...], culprit: str, tol: tuple) -> str | None:
    """The first node that ``culprit`` made wrong: in the forward graph, then the backward."""
    for graph, inputs, state, suffix in graphs:
        found = _first_difference(graph, inputs, state, pipeline, culprit, tol)
        if found is not None:
            return found + suffix
    return None


def _rule_checks(graphs: list, pipeline: tuple[str, ...]) -> tuple[RuleCheck, ...]:
    found = []
    for graph, inputs, state, suffix in graphs:
        for check in check_rules(graph, inputs, state, pipeline):
            found.append(RuleCheck(**{**check.__dict__, "node": check.node + suffix}))
    return tuple(found)


def compare_modes(
    fn: Callable,
    *args: Any,
    orders: Sequence[int] = (0, 1),
    passes: str | Sequence[str] | None = None,
    **kwargs: Any,
) -> Report:
    """Compare ``fn`` run compiled against an eager float64 reference; blame a pass on mismatch.

    Float arguments (tensors or arrays) are copied as grad-requiring tensors; order 0 compares
    outputs, order 1 the gradients of ``sum(outputs)``, order 2 those of the sum of squared
    first-order gradients. On a mismatch the report also names the culprit pass and node, and
    ``rules`` holds ``check_rules`` of the call's forward and backward graphs: which documented
    rules apply to which nodes, and whether each difference is within its bound.

    Example:
        >>> x = np.linspace(-1.0, 1.0, 8, dtype=np.float32)
        >>> compare_modes(lambda t: (t * 2.0).tanh(), x).ok
        True
    """
    pipeline = resolve_passes(passes if passes is None or isinstance(passes, str) else list(passes))
    rtol, atol = _tolerance(args)
    reference = _evaluate(fn, args, kwargs, np.float64, orders)
    _, got = _run_compiled(fn, args, kwargs, pipeline, orders)
    ok, max_abs, max_rel, worst = _difference(reference, got, rtol, atol)
    report = Report(ok, max_abs, max_rel, worst, passes=pipeline)
    report.nonfinite = next((f"{_kind(v)} in {k}" for k, v in reference.items() if _kind(v)), "")
    if ok:
        return report
    graphs = _raw_graphs(fn, args, kwargs)
    for name in pipeline:
        without = tuple(p for p in pipeline if p != name)
        _, retry = _run_compiled(fn, args, kwargs, without, orders)
        if _difference(reference, retry, rtol, atol)[0]:
            report.culprit_pass = name
            report.culprit_node = _culprit_node(graphs, pipeline, name, _tolerance(args))
            break
    report.rules = _rule_checks(graphs, pipeline)
    return report


def __getattr__(name: str) -> Any:
    # ``dualflow.debug.print`` without shadowing the builtin print inside this module
    if name == "print":
        return debug_print
    raise AttributeError(f"module 'dualflow.debug' has no attribute {name!r}")
