"""A trace with dynamic dimensions as a template: its plans for other sizes, and its witness check.

``Template.instance(binding)`` is the trace for another call's sizes without running Python:
the traced graphs (forward and backward) rebuilt for the binding (``symbolic_trace.instantiate``)
and put through the same passes and lowering as a trace (``pipeline.build_plan``); the last
``INSTANCES`` stay cached, so steady-state calls at sizes seen before allocate nothing new.

A template serves other sizes only once ``witnessed``: a real trace at other sizes made exactly
the graphs the template gives for those sizes. That catches what the symbolic sizes cannot
see — a size read from a raw array somewhere and baked into an attribute or a literal.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from typing import Any, NamedTuple

from dualflow.size_expressions import add, const, symbol
from dualflow.tracer.pipeline import build_plan
from dualflow.tracer.symbolic_trace import SymbolicShapes, instantiate, same_graph
from dualflow.tracer.trace import Trace

# plans kept per template, the least recently used dropped first: at most this many, and at most
# this many bytes of buffers held between calls (a ResNet step's plan holds ~100s of MB)
INSTANCES = 64
INSTANCE_BYTES = 512 * 2**20


def leaf_shapes(described: list[tuple[str, Any]]) -> list[tuple]:
    """The shapes of a signature's array leaves, in flat order (what ``binding`` reads)."""
    return [part[1] for _, part in described if part[0] in ("tensor", "array")]


class Verdict(NamedTuple):
    """A witness check's answer: ``reason`` None when the witness matches; ``refutes`` when it
    shows the template wrong at the witness's sizes (not merely another program)."""

    reason: str | None
    refutes: bool = False


def _state(trace: Trace) -> list[tuple[str, str]]:
    """What a trace captures, by kind and name: traces of one program capture the same."""
    return [(ref.kind, ref.name) for ref in trace.checks.refs]


class Template:
    """One trace with dynamic dimensions, the facts that make it one for every size, and the
    plans built from it so far."""

    def __init__(self, trace: Trace, facts: SymbolicShapes, passes: Any) -> None:
        self.trace, self.facts, self.passes = trace, facts, passes
        self.hints = dict(facts.env.hints)
        self.witnessed = False
        self.instances: OrderedDict[tuple, Trace] = OrderedDict()

    def binding(self, shapes: list[tuple]) -> dict[str, int] | None:
        """The symbols' sizes for a call whose array leaves have ``shapes`` (None: a size is 0,
        or the leaves do not fit); the guards then say whether the template holds there."""
        for position, dim, size in self.facts.constants:  # masked, but traced as 0 or 1
            if position >= len(shapes) or dim >= len(shapes[position]):
                return None
            if shapes[position][dim] != size:
                return None
        found = {}
        for position, dim, name in self.facts.symbols:
            if position >= len(shapes) or dim >= len(shapes[position]):
                return None
            size = shapes[position][dim]
            if size < 1:  # empty: another program (1 is excluded by guards where it differs)
                return None
            found[name] = int(size)
        return found

    def failing_guard(self, binding: dict[str, int]) -> str | None:
        """The first relation the trace depended on that ``binding`` breaks, or None."""
        return self.facts.env.failing(binding)

    def instance(self, binding: dict[str, int]) -> Trace:
        """The trace for ``binding``: the template itself at its own sizes, else built once."""
        if binding == self.hints:
            return self.trace
        key = tuple(sorted(binding.items()))
        found = self.instances.get(key)
        if found is not None:
            self.instances.move_to_end(key)
            return found
        found = self.build(binding)
        self.instances[key] = found
        while len(self.instances) > 1 and (
            len(self.instances) > INSTANCES or self.held_bytes() > INSTANCE_BYTES
        ):
            self.instances.popitem(last=False)
        return found

    def held_bytes(self) -> int:
        """Bytes the plans built from this template keep between calls (their buffers)."""
        total = 0
        for trace in self.instances.values():
            total += trace.plan.held_bytes
            if trace.backward is not None:
                total += trace.backward.plan.held_bytes
        return total

    def build(self, binding: dict[str, int]) -> Trace:
        """The trace for ``binding`` built anew (passes and lowering; ``instance`` caches it)."""
        trace = self.trace
        device, debug = trace.plan.device, trace.plan.debug
        source = instantiate(trace.source_graph, self.facts, binding)
        graph, plan, stats = build_plan(source, self.passes, device, debug=debug, donate=True)
        backward = trace.backward
        if backward is not None:
            bsource = instantiate(backward.source_graph, self.facts, binding)
            bgraph, bplan, _ = build_plan(bsource, self.passes, device, debug=debug)
            backward = dataclasses.replace(backward, graph=bgraph, plan=bplan, source_graph=bsource)
        sizes = ", ".join(f"{k}={v}" for k, v in sorted(binding.items()))
        return dataclasses.replace(
            trace,
            graph=graph,
            plan=plan,
            backward=backward,
            source_graph=source,
            pass_stats=stats,
            reason=f"{trace.reason}; built for {sizes} from the trace with dynamic sizes",
        )

    def check_witness(self, other: Trace) -> Verdict:
        """Compare with ``other`` (a real trace at other sizes): ``Verdict(None)`` when it is
        exactly this template's graphs for its sizes. Traces that capture other state, replay
        side effects or lack a backward are another program (not comparable, nothing refuted);
        with the same state, any difference shows a size the template took as a constant: the
        verdict ``refutes`` (refuting is always safe, only dynamism is lost)."""
        binding = self.binding(leaf_shapes(other.described))
        if binding is None or binding == self.hints:
            return Verdict("no other sizes to compare")
        if self.failing_guard(binding) is not None:  # the trace depends on sizes it excludes
            return Verdict(f"the trace holds only where {self.failing_guard(binding)}")
        mine = self.trace
        if other.source_graph is None or (
            other.backward is not None and other.backward.source_graph is None
        ):  # loaded from the disk cache, which keeps the optimized graph only
            return Verdict("the other trace has no source graph (loaded from a plan cache)")
        if (mine.backward is None) != (other.backward is None):
            return Verdict("one trace has a backward graph, the other not")
        if _state(mine) != _state(other) or mine.replay or other.replay:
            return Verdict("the traces capture different state or replay Python side effects")
        try:
            pairs = [(instantiate(mine.source_graph, self.facts, binding), other.source_graph)]
            if mine.backward is not None:
                graph = instantiate(mine.backward.source_graph, self.facts, binding)
                pairs.append((graph, other.backward.source_graph))
        except Exception as exc:
            return Verdict(f"the template does not fit the other trace's sizes: {exc}", True)
        for built, traced in pairs:
            difference = same_graph(built, traced)
            if difference is not None and 1 in binding.values():
                # eager at size 1 made another graph (a sum over one row left out): the
                # template stops serving 1, the other sizes stand
                for name in sorted(k for k, v in binding.items() if v == 1):
                    guard = (add(symbol(name), const(-1)), "!=", True)
                    if guard not in self.facts.env.guards:
                        self.facts.env.guards.append(guard)
                return Verdict(f"{difference} (at size 1: no longer served from the template)")
            if difference is not None:
                return Verdict(difference, True)
        return Verdict(None)
