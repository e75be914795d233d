"""Lazy re-execution's plans: one recorded segment, keyed by its structure, run by a cached plan.

A segment is what the recorder (``lazy_record``) wrote down between two points where Python
needed values: the ops with their operands (earlier results by number, arrays read by reference,
Python literals) and attributes, the arrays it reads, the results still alive, and the arrays it
writes. Its *structural key* is all of that except the data: two calls that issue the same ops on
arrays of the same shapes, dtypes and layouts share a plan, whatever objects the arrays are.

The first time a key is seen its ops run one by one with their eager kernels (exactly eager, and
no compile cost for a program that never repeats); from the second time on the segment is
compiled once (the same passes and lowering as a trace) and runs as a plan. Either way the
results fill the recorded results' ``Pending`` arrays and the writes are committed after the
undo log has saved their targets, so a call that later fails still leaves all old state.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dualflow.graph_ir.builder import GraphBuilder
from dualflow.ops.registry import Meta, OpDef
from dualflow.tracer.pipeline import build_plan


def root_of(array: Any) -> Any:
    """The array that owns ``array``'s memory (itself when it is not a view).

    Example:
        >>> a = np.zeros(4); root_of(a[1:]) is a
        True
    """
    while getattr(array, "base", None) is not None:
        array = array.base
    return array


@dataclass
class Segment:
    """What one stretch of a lazily run call recorded (filled by ``LazyRecorder``)."""

    ops: list[tuple[OpDef, tuple, dict, list[Meta]]] = field(default_factory=list)
    key: list[tuple] = field(default_factory=list)  # per op: (name, operands, frozen attrs)
    refs: list[Any] = field(default_factory=list)  # arrays read by reference, by slot
    metas: list[Meta] = field(default_factory=list)  # per result number: its shape and dtype
    updates: dict[int, int] = field(default_factory=dict)  # ref slot -> result number written
    keep: list[Any] = field(default_factory=list)  # views made at once (their ids stay unique)

    def record(self, op: OpDef, operands: tuple, attrs: dict, metas: list, frozen: tuple) -> int:
        """Append one op call; returns its first result's number (the next ones follow)."""
        self.ops.append((op, operands, attrs, metas))
        self.key.append((op.name, operands, frozen))
        self.metas.extend(metas)
        return len(self.metas) - len(metas)

    def structure(self, outputs: list[int], flags: Any) -> tuple:
        """The structural key: ops, the refs' layouts and sharing, outputs, writes, config."""
        roots: dict[int, int] = {}
        layouts = []
        for slot, array in enumerate(self.refs):
            shared = roots.setdefault(id(root_of(array)), slot)
            layouts.append((array.shape, array.dtype.str, array.strides, shared))
        writes = tuple(sorted(self.updates.items()))
        return (tuple(self.key), tuple(layouts), tuple(outputs), writes, flags)


@dataclass
class CompiledSegment:
    """A segment's plan and what its outputs may share with (copied before they are handed out)."""

    plan: Any
    graph: Any
    pass_stats: list


class LazyPlans:
    """The plans of one compiled function's lazily run segments, by structural key.

    Example:
        >>> LazyPlans("O2").stats()
        {'segments': 0, 'plan_segments': 0, 'compiled': 0}
    """

    MAX_SEEN = 256  # keys remembered (seen once: run op by op)
    MAX_PLANS = 32  # compiled segments kept

    def __init__(self, passes: Any, name: str = "lazy") -> None:
        self.passes, self.name = passes, name
        self.seen: OrderedDict[tuple, int] = OrderedDict()
        self.plans: OrderedDict[tuple, CompiledSegment] = OrderedDict()
        self.segments = self.plan_segments = self.compiled = 0
        self.compile_seconds = 0.0
        self.plan_ops = self.eager_ops = 0  # recorded ops run by plans; ops run eagerly
        self.call_steps = 0  # kernels (or eager ops) the current call's segments ran so far
        self.breaks: dict[str, int] = {}  # user line -> graph breaks there

    def stats(self) -> dict[str, int]:
        """Segments run, those run by a plan, plans compiled."""
        return {
            "segments": self.segments,
            "plan_segments": self.plan_segments,
            "compiled": self.compiled,
        }

    def report(self, stats: Any) -> Any:
        """``stats`` (a compiled function's ``Stats``) with these plans' counters filled in."""
        stats.lazy_segments, stats.lazy_plan_segments = self.segments, self.plan_segments
        stats.lazy_plan_ops, stats.lazy_eager_ops = self.plan_ops, self.eager_ops
        stats.graph_breaks = sum(self.breaks.values())
        return stats

    def run(self, segment: Segment, outputs: list[int], flags: Any) -> tuple[list, dict]:
        """The arrays of result numbers ``outputs`` and of the writes (slot -> array)."""
        self.segments += 1
        key = segment.structure(outputs, flags)
        compiled = self.plans.get(key)
        if compiled is None and self._count(key) >= 2:
            compiled = self._compile(segment, outputs, key)
        if compiled is None:
            self.call_steps += len(segment.ops)
            self.eager_ops += len(segment.ops)
            return run_op_by_op(segment, outputs)
        self.call_steps += compiled.plan.steps
        self.plan_ops += len(segment.ops)
        self.plans.move_to_end(key)
        self.plan_segments += 1
        result = compiled.plan.run([], list(segment.refs))
        arrays = _unshared(list(result.outputs), segment.refs, compiled.graph)
        n = len(outputs)
        return arrays[:n], dict(zip(sorted(segment.updates), arrays[n:]))

    def _count(self, key: tuple) -> int:
        count = self.seen.pop(key, 0) + 1
        self.seen[key] = count
        if len(self.seen) > self.MAX_SEEN:
            self.seen.popitem(last=False)
        return count

    def _compile(self, segment: Segment, outputs: list[int], key: tuple) -> CompiledSegment:
        start = time.perf_counter()
        graph = segment_graph(segment, outputs, self.name)
        optimized, plan, stats = build_plan(graph, self.passes, "cpu")
        self.compile_seconds += time.perf_counter() - start
        compiled = CompiledSegment(plan, optimized, stats)
        self.plans[key] = compiled
        self.compiled += 1
        if len(self.plans) > self.MAX_PLANS:
            self.plans.popitem(last=False)
        return compiled


def segment_graph(segment: Segment, outputs: list[int], name: str) -> Any:
    """The segment as a graph: refs are state (read by reference), results the outputs, and
    the writes extra outputs after them (the plan never writes an array itself)."""
    builder = GraphBuilder(name)
    values = [builder.add_state(a.shape, a.dtype, f"ref{k}") for k, a in enumerate(segment.refs)]
    results: list[Any] = []

    def value(operand: Any) -> Any:
        if type(operand) is tuple:  # a Python literal: (its type, itself)
            return operand[1]
        return results[operand] if operand >= 0 else values[-1 - operand]

    for op, operands, attrs, metas in segment.ops:
        results.extend(builder.node(op.name, [value(o) for o in operands], attrs, None, metas))
    builder.output(*(value(n) for n in outputs))
    builder.output(*(value(segment.updates[slot]) for slot in sorted(segment.updates)))
    return builder.build()


def run_op_by_op(segment: Segment, outputs: list[int]) -> tuple[list, dict]:
    """The segment run as eager runs it: each op's kernel in order (a key seen once)."""
    results: list[Any] = []
    refs = segment.refs

    def array(operand: Any) -> Any:
        if type(operand) is tuple:
            return operand[1]
        return results[operand] if operand >= 0 else refs[-1 - operand]

    for op, operands, attrs, metas in segment.ops:
        out = op.forward(np, *[array(o) for o in operands], **attrs)
        outs = out if len(metas) != 1 else (out,)
        results.extend(o if type(o) is np.ndarray else np.asarray(o) for o in outs)
    slots = sorted(segment.updates)
    wanted = [array(n) for n in outputs] + [array(segment.updates[s]) for s in slots]
    arrays = _unshared(wanted, refs, None)
    return arrays[: len(outputs)], dict(zip(slots, arrays[len(outputs) :]))


def _unshared(arrays: list, refs: list, graph: Any) -> list:
    """Outputs and written values that share memory with a ref (the passes made an op an
    identity; a write's value viewing an array another write changes first), with each other
    (merged by CSE) or with the plan's constants, copied: eager gave each its own."""
    taken = {id(root_of(a)) for a in refs}
    if graph is not None:
        taken.update(id(root_of(a)) for a in graph.consts.values())
    for i, a in enumerate(arrays):
        root = id(root_of(a))
        if root in taken:
            arrays[i] = a = np.array(a, copy=True)
            root = id(a)
        taken.add(root)
    return arrays
