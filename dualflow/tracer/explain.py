"""``dualflow.explain``: what a compiled function turned into, and why it retraced.

It reports every trace (why it was made, e.g. ``x.shape[0]: 32 -> 48``), its guards with their
source lines, captured state and updates, graph sizes, the printed graph and its memory plan
(one row per planned buffer value, then the predicted peak), what it recomputes
(``memory_budget``'s report, or a checkpoint's recompute nodes), what it holds between calls (plan
buffers, constants), plus the counters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dualflow.graph_ir.printer import print_graph
from dualflow.passes.remat import describe as recompute_lines
from dualflow.tracer.compiled import CompiledFunction, Stats
from dualflow.tracer.dynamic_dims import describe as describe_dynamic
from dualflow.tracer.env_guards import is_value
from dualflow.tracer.explain_passes import describe_passes
from dualflow.tracer.explain_profile import profile_lines, request_profile
from dualflow.tracer.held import held_by
from dualflow.tracer.trace import Trace


@dataclass
class Explanation:
    """The report ``explain`` returns; ``str()`` renders it for people."""

    name: str
    traces: list[Trace]
    stats: Stats
    eager_reason: str | None
    passes: bool = False  # also show the graph after every pass
    lazy: Any = None  # (why it runs by lazy re-execution, its LazyPlans) when it does
    dynamic: Any = None  # the function's DynamicDims (issue 39)

    def __str__(self) -> str:
        s = self.stats
        lines = [
            f"compiled function {self.name}: {s.calls} calls, {s.traces} traces, "
            f"{s.plan_runs} plan runs, {s.guard_failures} guard failures, "
            f"{s.eager_fallbacks} eager fallbacks, {s.compile_seconds * 1e3:.1f} ms compiling"
        ]
        if s.cache_loads or s.cache_stores:
            lines.append(
                f"plan cache: {s.cache_loads} traces loaded ({s.load_seconds * 1e3:.1f} ms), "
                f"{s.cache_stores} stored"
            )
        if self.traces:  # what the function keeps alive between calls, all traces together
            lines.append(held_by(self.traces).describe())
        if self.eager_reason:
            lines.append(f"runs eagerly now because: {self.eager_reason}")
        if self.lazy is not None:
            lines.extend(_lazy_lines(s, *self.lazy))
        if self.dynamic is not None:
            lines.extend(describe_dynamic(self.dynamic))
        for i, trace in enumerate(self.traces):
            lines.extend(_describe(i, trace))
            if self.passes:
                lines.extend(describe_passes(trace))
        return "\n".join(lines)


def _lazy_lines(stats: Stats, reason: str, plans: Any, choice: Any = None) -> list[str]:
    """How the lazy path served its calls, and where Python needed values (graph breaks)."""
    lines = [
        f"runs by lazy re-execution because: {reason}",
        f"  {stats.lazy_calls} lazy calls, {stats.lazy_segments} segments "
        f"({stats.lazy_plan_segments} run by plans, the others op by op when first seen), "
        f"{plans.compiled} plans compiled, {stats.graph_breaks} graph breaks",
        f"  {stats.lazy_plan_ops} ops run by plans, {stats.lazy_eager_ops} run eagerly",
    ]
    if choice is not None and choice.describe() is not None:
        lines.append(choice.describe())
    for line, count in sorted(plans.breaks.items(), key=lambda item: -item[1]):
        lines.append(f"  graph break at {line}: {count} times (Python needed a tensor's value)")
    return lines


def _describe(index: int, trace: Trace) -> list[str]:
    g = trace.graph
    lines = [
        f"\ntrace {index}: {trace.reason}",
        f"  {len(g.nodes)} nodes, {len(g.inputs)} inputs, {len(g.state)} captured state, "
        f"{len(g.updates)} updates, {len(trace.grad_owners)} .grad writes",
    ]
    if trace.cache_note:
        lines.append(f"  {trace.cache_note}")
    for guard in g.guards:
        lines.append(f"  guard {guard.attrs['kind']}() == {guard.attrs['expect']!r} at {guard.loc}")
    lines.extend(_environment(trace))
    for st in trace.pass_stats:
        lines.append(
            f"  pass {st.name}: {st.nodes_before} -> {st.nodes_after} nodes, "
            f"{st.seconds * 1e3:.2f} ms, {st.bytes_removed} bytes of values removed"
        )
    if trace.backward is not None:
        lines.append(
            f"  backward graph: {len(trace.backward.graph.nodes)} nodes, "
            f"{len(trace.backward.residuals)} saved forward values"
        )
    lines.append("  " + print_graph(g).replace("\n", "\n  "))
    lines.append("  memory plan:")
    lines.append("    " + trace.plan.memory_table().replace("\n", "\n    "))
    peak = trace.plan.predicted_peak
    if peak is not None:
        lines.append(f"  predicted peak: {peak} B ({peak / 2**20:.2f} MiB)")
    lines += ["  " + line for line in recompute_lines(g)]  # remat / compiled checkpoints
    if trace.backward is not None:
        lines += ["  backward " + line for line in recompute_lines(trace.backward.graph)]
    lines.append("  " + held_by([trace]).describe())
    lines += profile_lines(trace.plan, "plan")
    if trace.backward is not None:
        lines += profile_lines(trace.backward.plan, "backward plan")
    return lines


def _environment(trace: Trace) -> list[str]:
    """The Python side: environment guards (place and how it is compared), side effects."""
    env = trace.checks.env.entries
    lines = [f"  environment guards ({len(env)}; checked at every call):"] if env else []
    for guard in env:
        if guard.kind == "content":
            how = f"holds the same {len(guard.expect)} items"
        elif is_value(guard.expect):
            how = f"== {guard.expect!r}"
        else:
            how = f"is the same {_type(guard.expect)}"
        lines.append(f"    {guard.label} {how}")
    lines += [f"  replayed after each plan run: {what}" for what in trace.replay.describe()]
    if trace.history is not None:
        lines.append(
            f"  reads the autograd history of arguments {trace.history.positions} "
            f"({trace.history.inputs} saved arrays as inputs)"
        )
    return lines


def _type(value: Any) -> str:
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    kind = type(value).__name__
    return f"{kind} {name}" if isinstance(name, str) else kind


def explain(
    fn: Any, *args: Any, passes: bool = False, profile: bool = False, **kwargs: Any
) -> Explanation:
    """Explain a compiled function; with arguments, first call it once with them (for real).

    ``passes=True`` also prints each trace's graph as traced and after every pass (forward and
    backward), in process: what ``DUALFLOW_DUMP_IR`` writes to files. ``profile=True`` then
    calls it once more with the same arguments (for real: state updates commit as usual) with
    every plan timing its steps, and prints the slowest steps with their source lines and the
    GFLOP/s of matmuls and convolutions.

    Example:
        >>> import dualflow
        >>> f = dualflow.compile(lambda x: x * 2)
        >>> report = explain(f, dualflow.tensor([1.0]))
        >>> report.stats.traces, "multiply" in str(report)
        (1, True)
    """
    if not isinstance(fn, CompiledFunction):
        raise TypeError(f"explain needs a function made by dualflow.compile, got {fn!r}")
    if args or kwargs:
        fn(*args, **kwargs)
    if profile:
        request_profile(fn)
        try:
            fn(*args, **kwargs)
        finally:
            request_profile(fn, on=False)
    name = getattr(fn.fn, "__qualname__", None) or type(fn.fn).__name__
    lazy = None if fn._lazy_reason is None else (fn._lazy_reason, fn._lazy_plans, fn._lazy_choice)
    return Explanation(
        name, list(fn.history), fn.stats(), fn._eager_reason, passes, lazy, fn.dynamic
    )
