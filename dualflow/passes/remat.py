"""Rematerialization: recompute forward values before their backward uses instead of keeping
them alive in between, until the memory planner's predicted peak fits a budget.

``remat=B`` in a pipeline (``@dualflow.compile(memory_budget=B)`` appends it) runs the pass with
budget ``B``: an int is bytes, a float in (0, 1] a fraction of the graph's planned peak without
it. The search (``remat_search``) picks, at the step where the most bytes are alive, the value
quickest to compute again per byte it frees (``remat_cost``: views, elementwise ops and batch
norms first, convolution and matmul outputs last), copies its producer (and, where cheaper in
bytes, the producers of its inputs) just before its first late reader, and points the late
readers at the copy; a value with no early reader is just moved. Then copies the planned peak
does not need are merged back, costliest first. The copies are recompute nodes
(``Node.recompute``), which CSE never merges back. Each copy is the same op on the same
operands, so every value keeps its bits. When no choice lowers the peak further, a
``RuntimeWarning`` gives the peak achieved.
``report_of(graph)`` tells what was recomputed (``explain`` prints it). Without a budget
(``remat`` alone) the pass changes nothing.

With ``remat=0.8`` the planned peak falls from 68 B to 52 B.

Before::

    graph f(%0: float32[4] "x") {
      %1: float32[4] = exp(%0)
      %2: float32[4] = tanh(%1)
      %3: float32[4] = negative(%0)
      %4: float32[4] = multiply(%2, %3)
      %5: float32[] = sum(%4) {axis=None, keepdims=False}
      %6: float32[4] = multiply(%1, %5)
      return %6
    }

After::

    graph f(%0: float32[4] "x") {
      %1: float32[4] = exp(%0)
      %2: float32[4] = tanh(%1)
      %3: float32[4] = negative(%0)
      %4: float32[4] = multiply(%2, %3)
      %5: float32[] = sum(%4) {axis=None, keepdims=False}
      %7: float32[4] = recompute exp(%0)
      %6: float32[4] = multiply(%7, %5)
      return %6
    }
"""

from __future__ import annotations

import dataclasses
import os
import sys
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from dualflow.errors import ConfigError
from dualflow.graph_ir.ir import Graph, Node
from dualflow.passes.cse import cse
from dualflow.passes.dce import dce
from dualflow.passes.remat_cost import node_cost
from dualflow.passes.remat_cost import node_flops as node_flops
from dualflow.passes.remat_search import (
    TRIES,
    Profile,
    apply,
    candidates,
    choose,
    merge,
    profile,
    source,
)
from dualflow.runtime.donation import donations
from dualflow.runtime.memory import plan_memory

MAX_ROUNDS = 4  # re-plans when the planner's peak (its buffer reuse) exceeds the profile's


@dataclass
class RematReport:
    """What ``remat`` did to one graph: the budget, planned peaks and the copies it made."""

    budget: int | float
    target: int  # the budget in bytes
    before: int  # planned peak without the pass
    after: int
    recomputed: list[Node] = field(default_factory=list)
    extra_flops: int = 0  # FLOPs of the copies less those of the originals dropped
    # (the copies' cost, the whole graph's cost before), in FLOPs of time (``remat_cost``)
    cost: tuple[int, int] = (0, 0)
    sources: dict[int, int] = field(default_factory=dict)  # copy's value id -> the value's id

    @property
    def extra_time(self) -> float:
        """The copies' estimated time as a fraction of the step's before the pass.

        Example:
            >>> RematReport(0.5, 50, 100, 48, cost=(30, 200)).extra_time
            0.15
        """
        return self.cost[0] / self.cost[1] if self.cost[1] else 0.0

    def lines(self) -> list[str]:
        """The report as text lines (``explain``).

        Example:
            >>> RematReport(0.5, 50, 100, 48).lines()[0]
            'memory_budget=0.5 (50 B): planned peak 100 B -> 48 B, 0 values recomputed, 0 extra FLOPs (+0.0% step time, estimated)'
        """  # noqa: E501
        head = (
            f"memory_budget={self.budget!r} ({self.target} B): planned peak {self.before} B -> "
            f"{self.after} B, {len(self.recomputed)} values recomputed, "
            f"{self.extra_flops} extra FLOPs (+{100 * self.extra_time:.1f}% step time, estimated)"
        )
        ops = [
            f"  recompute {n.op} -> %{n.outputs[0].id}{self._of(n)} at {n.loc}"
            for n in self.recomputed
        ]
        return [head, *ops]

    def _of(self, node: Node) -> str:
        source = self.sources.get(node.outputs[0].id)
        return "" if source is None else f" (again: %{source})"


_REPORTS: weakref.WeakKeyDictionary[Graph, RematReport] = weakref.WeakKeyDictionary()


def report_of(graph: Graph) -> RematReport | None:
    """The report of the ``remat`` run that made ``graph``, if one did (in this process)."""
    return _REPORTS.get(graph)


def describe(graph: Graph) -> list[str]:
    """What ``graph`` recomputes, for ``explain``: the ``remat`` report (budget, planned peak
    before and after, the copies, extra FLOPs), else its recompute nodes (a checkpointed
    segment's re-run, or the copies of a plan loaded from the plan cache, whose report stayed in
    the process that made it), with the planned peak were CSE to merge them back; [] when none.

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((4,), "float32"); b.output(*b.node("exp", [x]))
        >>> describe(b.build())
        []
    """
    report = report_of(graph)
    if report is not None:
        return report.lines() if report.recomputed or report.after != report.before else []
    marked = [n for n in graph.nodes if n.recompute]
    if not marked:
        return []
    plain = tuple(dataclasses.replace(n, recompute=False) for n in graph.nodes)
    merged = planned_peak(dce(cse(graph.replace(nodes=plain))))
    lines = [
        f"recompute nodes (checkpoints, or a stored plan's remat): {len(marked)}, "
        f"{sum(map(node_flops, marked))} FLOPs; planned peak {planned_peak(graph)} B ({merged} B "
        "with them merged back)"
    ]
    return lines + [
        f"  recompute {n.op} -> %{n.outputs[0].id} at {n.loc}" for n in marked if n.outputs
    ]


def check_argument(budget: object, setting: str = "remat") -> int | float:
    """``budget`` checked: an int of bytes > 0 or a float in (0, 1] (ConfigError otherwise).

    Example:
        >>> check_argument(0.5), check_argument(1 << 20)
        (0.5, 1048576)
    """
    if isinstance(budget, bool) or not isinstance(budget, int | float):
        raise ConfigError(
            f"{setting}={budget!r}: the memory budget must be an int (bytes) or a float in "
            f"(0, 1] (a fraction of the planned peak), not {type(budget).__name__}"
        )
    if isinstance(budget, int) and budget <= 0:
        raise ConfigError(f"{setting}={budget!r}: a budget in bytes must be > 0")
    if isinstance(budget, float) and not 0.0 < budget <= 1.0:
        raise ConfigError(f"{setting}={budget!r}: a fractional budget must be in (0, 1]")
    return budget


def budget_passes(budget: object) -> tuple[str, ...]:
    """The pipeline entry ``compile(memory_budget=...)`` appends: none for None.

    Example:
        >>> budget_passes(None), budget_passes(0.5), budget_passes(4096)
        ((), ('remat=0.5',), ('remat=4096',))
    """
    if budget is None:
        return ()
    return (f"remat={check_argument(budget, 'memory_budget')!r}",)


def planned_peak(graph: Graph) -> int:
    """The memory planner's predicted peak of ``graph`` lowered with donation, as compiled
    steps are (CPU scratch included).

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((4,), "float32"); b.output(*b.node("exp", [x]))
        >>> planned_peak(b.build())
        16
    """
    return plan_memory(graph, frozenset(donations(graph))).predicted_peak


def _greedy(prof: Profile, goal: int, origins: dict) -> Profile:
    """Free values at the peak step, one accepted rewrite at a time, until the profile's peak
    is at most ``goal`` or no candidate lowers it."""
    next_id = 1 + max(v.id for v in _values(prof.graph))
    for _ in range(4 * len(prof.graph.nodes) + 16):
        if prof.peak <= goal:
            break
        step = int(prof.live.argmax())
        choices = [c for c in (choose(prof, v, step) for v in candidates(prof, step)) if c]
        choices.sort(key=lambda c: (c.cost / c.gain, -c.gain))
        for choice in choices[:TRIES]:
            graph, copies, _ = apply(prof, choice, step, next_id, origins)
            tried = profile(graph)
            if tried.score < prof.score:
                prof, next_id = tried, next_id + sum(len(n.outputs) for n in copies)
                break
        else:
            break
    return prof


def _prune(graph: Graph, original: Graph, origins: dict, limit: int) -> Graph:
    """Merge each copy into the latest earlier node computing the same values (the original or
    another copy) wherever the planned peak stays at most ``limit``, costliest first: a copy made
    for an earlier peak may be one a later choice made useless, and two copies of one node made
    for readers at different steps may need only one."""
    copies = _copies(original, graph)
    for copy in sorted(copies, key=lambda n: -node_cost(n)):
        if node_cost(copy) == 0:
            break  # views: nothing to save
        merged = merge(graph, copy.outputs[0], origins)
        if merged is None or profile(merged).peak > limit:  # a quick test: the planner holds
            continue  # its pooled buffers throughout, so its peak is rarely below the profile's
        if planned_peak(merged) <= limit:
            graph = merged
    return graph


def _copies(original: Graph, graph: Graph) -> list[Node]:
    """The recompute nodes of ``graph`` that ``original`` does not have (rewiring keeps a
    node's output values, so those tell them apart)."""
    produced = {v for n in original.nodes for v in n.outputs}
    return [n for n in graph.nodes if n.recompute and n.outputs and n.outputs[0] not in produced]


def _total(cost: Callable[[Node], int], graph: Graph) -> int:
    return sum(map(cost, graph.nodes))


def _values(graph: Graph) -> list:
    return [*graph.inputs, *graph.state, *graph.consts, *graph.producers]


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _outside_dualflow() -> int:
    """``warnings.warn``'s stacklevel naming the first caller outside dualflow (the user's call
    of the compiled function), however deep the tracer and the pass manager are."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


def remat(graph: Graph, budget: int | float | None = None) -> Graph:
    """Recompute forward values in backward until the planned peak fits ``budget`` (bytes, or
    a fraction of the planned peak without the pass); ``graph`` itself when nothing changes.

    Example:
        >>> from dualflow.graph_ir import parse_graph
        >>> g = parse_graph(__doc__.split("Before::")[1].split("After::")[0])  # the example
        >>> after = remat(g, 0.8); [n.op for n in after.nodes if n.recompute]
        ['exp']
        >>> report_of(after).before, report_of(after).after, remat(g) is g
        (68, 52, True)
    """
    if budget is None:
        return graph
    check_argument(budget)
    before = planned_peak(graph)
    target = budget if isinstance(budget, int) else int(budget * before)
    origins: dict = {}
    prof, goal, after = profile(graph), target, before
    for _ in range(MAX_ROUNDS if before > target else 0):
        prof = _greedy(prof, goal, origins)
        after = planned_peak(prof.graph)
        if after <= target or prof.peak > goal:  # fits, or the search is stuck
            break
        goal = prof.peak - (after - target)  # the planner's reuse wastes this much more
    result = _prune(prof.graph, graph, origins, max(target, after))
    after = planned_peak(result) if result is not prof.graph else after
    made = _copies(graph, result)
    if not made:  # no copy: the graph as it was, and the report says so (its peak, no FLOPs)
        result, after = graph, before
    flops = _total(node_flops, result) - _total(node_flops, graph)
    cost = (_total(node_cost, result) - _total(node_cost, graph), _total(node_cost, graph))
    sources = {n.outputs[0].id: source(n.outputs[0], origins).id for n in made}
    _REPORTS[result] = RematReport(budget, target, before, after, made, flops, cost, sources)
    if after > target:
        warnings.warn(
            f"remat: graph {graph.name}: the memory budget {budget!r} ({target} B) cannot be "
            f"met; the planned peak is {after} B after recomputing {len(made)} values ({before} B "
            "before)",
            RuntimeWarning,
            stacklevel=_outside_dualflow(),
        )
    return result
