"""The step profile ``explain(fn, ..., profile=True)`` prints: time per plan step, slowest first,
with the achieved GFLOP/s of steps whose op knows its work (``OpDef.flops``: matmul and the
convolutions, forward and backward), so a slow layer shows how far it is from the GEMM rate.
A convolution counts its direct form's work: a Winograd layer may show more than the GEMM rate.
Each such step also shows its share of the machine's GEMM rate (``runtime.machine_rates``,
measured at the first profile a process prints), and the profile's head names that rate. A
matmul step also shows numpy's rate for the same operand shapes and layouts run alone in this
process (``runtime.gemm_alone``) and the step's share of it; the head sums that share over every
matmul step of the plan (``gemm_alone_share`` gives the bench the same over a whole step).
"""

from __future__ import annotations

from typing import Any

from dualflow.graph_ir.ir import Node
from dualflow.kernels.base import blas_core
from dualflow.ops.registry import OPS
from dualflow.runtime.gemm_alone import alone_seconds
from dualflow.runtime.machine_rates import machine_rates

ROWS = 20  # the slowest steps shown per plan


def step_flops(node: Node) -> int | None:
    """Floating-point operations of one run of ``node``'s step, or None when its op has no
    ``flops`` fact.

    Example:
        >>> from dualflow.graph_ir.ir import Value
        >>> n = Node("matmul", (Value(0, (4, 8), "float32"), Value(1, (8, 2), "float32")),
        ...          (Value(2, (4, 2), "float32"),))
        >>> step_flops(n)
        128
    """
    op = OPS.get(node.op)
    if op is None or op.flops is None:
        return None
    return int(op.flops(node.input_metas, node.attrs))


def plan_flops(fn: Any) -> int | None:
    """The FLOPs (matmuls, convolutions) of one run of ``fn``'s last trace, forward and backward
    plans; None when it has not run as a plan or has no such step (the bench's GFLOP/s).

    Example:
        >>> import dualflow
        >>> f = dualflow.compile(lambda a, b: a @ b)
        >>> _ = f(dualflow.ones(4, 8), dualflow.ones(8, 2))
        >>> plan_flops(f)
        128
    """
    history = getattr(fn, "history", None)
    if not history:
        return None
    trace = history[-1]
    plans = [trace.plan] + ([trace.backward.plan] if trace.backward is not None else [])
    counts = [step_flops(node) for plan in plans for node in plan.graph.nodes]
    total = sum(c for c in counts if c)
    return total or None


def profile_lines(plan: Any, title: str) -> list[str]:
    """The rows of one plan's last profiled run (none when it has not run profiled)."""
    times = getattr(plan, "profile_times", None)
    if times is None:
        return []
    total = float(times.sum())
    lines = [f"  profile of the {title}'s last profiled run: {total * 1e3:.3f} ms in steps"]
    if any(step_flops(node) for node in plan.graph.nodes):
        lines.append(f"  {machine_rates().describe()}; {blas_core.choice().describe()}")
    seen = getattr(plan, "profile_layouts", None) or {}
    alone = {i: alone_seconds(spec) for i, spec in seen.items()}
    if alone:
        inside = sum(float(times[i]) for i in alone)
        lines.append(
            f"  matmul steps: {inside * 1e3:.3f} ms in the plan, {sum(alone.values()) * 1e3:.3f}"
            f" ms alone in numpy (same shapes and layouts): {_share(alone.values(), inside)}"
        )
    order = sorted(range(len(times)), key=lambda i: -times[i])[:ROWS]
    for i in order:
        node, seconds = plan.graph.nodes[i], float(times[i])
        flops = step_flops(node)
        rate = _rate(flops, seconds) + _alone(flops, alone.get(i), seconds)
        share = 100 * seconds / total if total > 0 else 0.0
        lines.append(
            f"    {seconds * 1e3:9.3f} ms {share:5.1f}%  {node.op:<20} {node.loc or '-'}{rate}"
        )
    return lines


def _rate(flops: int | None, seconds: float) -> str:
    """A step's GFLOP/s and its share of the machine's GEMM rate (measured once a process)."""
    if not flops or seconds <= 0:
        return ""
    gflops = flops / seconds / 1e9
    return f"  {gflops:8.1f} GFLOP/s {machine_rates().gemm_share(gflops):5.0%} of the GEMM rate"


def _share(alone: Any, inside: float) -> str:
    return f"{sum(alone) / inside:.0%} of numpy's rate alone" if inside > 0 else "-"


def _alone(flops: int | None, alone: float | None, seconds: float) -> str:
    """numpy's rate for the step's shapes and layouts alone, and the step's share of it."""
    if not flops or alone is None or alone <= 0 or seconds <= 0:
        return ""
    return f"; numpy alone {flops / alone / 1e9:.1f} GFLOP/s, here {alone / seconds:.0%} of it"


def gemm_alone_share(fn: Any, call: Any, runs: int = 3) -> float | None:
    """The matmul steps' time alone in numpy over their time in ``fn``'s plans (each step's
    fastest of ``runs`` profiled calls of ``call``, which runs ``fn`` once); None when its last
    trace has no matmul step (or ``fn`` is not compiled).

    Example:
        >>> import dualflow
        >>> f = dualflow.compile(lambda a, b: (a @ b).sum())
        >>> a, b = dualflow.ones(64, 64), dualflow.ones(64, 64)
        >>> _ = f(a, b)
        >>> 0 < gemm_alone_share(f, lambda: f(a, b))
        True
    """
    if not getattr(fn, "history", None):
        return None
    best: dict[tuple, float] = {}
    for _ in range(runs):
        request_profile(fn)
        call()
        for plan in _plans(fn):
            for i in getattr(plan, "profile_layouts", None) or {}:
                key = (id(plan), i)
                best[key] = min(best.get(key, float("inf")), float(plan.profile_times[i]))
    specs = {(id(p), i): spec for p in _plans(fn) for i, spec in p.profile_layouts.items()}
    inside = sum(best[k] for k in specs if k in best)
    alone = sum(alone_seconds(spec) for k, spec in specs.items() if k in best)
    return alone / inside if inside > 0 else None


def _plans(fn: Any) -> list:
    trace = fn.history[-1]
    return [trace.plan] + ([trace.backward.plan] if trace.backward is not None else [])


def request_profile(fn: Any, on: bool = True) -> None:
    """Have every plan of ``fn``'s traces (forward and backward) time its next run (``on``), or
    no longer (a call that retraced or ran eagerly leaves the request unused)."""
    for trace in fn.history:
        trace.plan.profile_next = on
        if trace.backward is not None:
            trace.backward.plan.profile_next = on
