"""``lower(graph, device) -> Plan`` and the Plan: a compiled straight-line executor of a graph.

``Plan.run`` evaluates guards in schedule order and stops at the first failing one, returning no
updates, so the caller can commit state writes only when every guard passed (all or nothing).
``profile=True`` records per-node times. With memory planning, steps that can write ``out=``
use buffers allocated at the first run and kept by the plan (so one plan runs one call at a time).
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dualflow.device import Device, send
from dualflow.graph_ir.ir import Graph, Node
from dualflow.graph_ir.layout import C_BROADCAST, C, layouts
from dualflow.ops.host_print import held_messages
from dualflow.ops.registry import OPS
from dualflow.runtime.bytecode_cache import compile_plan
from dualflow.runtime.codegen import render
from dualflow.runtime.donation import donations
from dualflow.runtime.memory import MemoryPlan
from dualflow.runtime.memory import plan_memory as _plan_memory
from dualflow.runtime.out_forward import node_kernel, out_kernel
from dualflow.runtime.recycle import unreferenced_bytes
from dualflow.runtime.step_errors import (
    check_finite,
    raising_step,
    relocated,
    step_lines,
    step_of,
)


@dataclass
class RunResult:
    """Outputs and new state values of one run, or the index of the guard that failed."""

    outputs: tuple | None
    updates: tuple | None
    failed_guard: Node | None = None
    seen: Any = None  # the value the failed guard saw in this call


def _concrete(value: Any) -> Any:
    """A guard operand as a Python value, for messages (None when it is not one element)."""
    try:
        return value.item() if getattr(value, "size", 0) == 1 else None
    except Exception:
        return None


def proven_c_ordered(graph: Graph) -> frozenset[int]:
    """Ids of the nodes whose array operands are C-ordered whenever the plan's inputs and state
    are (``graph_ir/layout.py``): their steps may write ``out=`` without a run-time check.

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2, 3), "float32")
        >>> (y,) = b.node("exp", [x]); (t,) = b.node("transpose", [y], {"axes": (1, 0)})
        >>> (z,) = b.node("exp", [t]); b.output(z)
        >>> g = b.build(); [id(n) in proven_c_ordered(g) for n in g.nodes]
        [True, True, False]
    """
    static = layouts(graph, arguments=C)
    like_c = (C, C_BROADCAST)  # numpy allocates their elementwise results C-ordered too
    return frozenset(
        id(n) for n in graph.nodes if all(static.get(v) in like_c for v in n.value_inputs)
    )


@dataclass
class Plan:
    """An executable form of one graph on one device."""

    graph: Graph
    device: Device
    source: str
    _run: Any = field(repr=False)
    _profiled_runs: dict = field(default_factory=dict, repr=False)  # fast or not -> run
    memory: MemoryPlan | None = None
    _buffers: list | None = field(default=None, repr=False)
    _xp: Any = field(default=None, repr=False)
    _consts: list = field(default_factory=list, repr=False)
    donated_slots: tuple[int, ...] = ()  # state arrays its updates are written into directly
    donated: dict = field(default_factory=dict, repr=False)  # update value -> its state value
    _undonated_run: Any = field(default=None, repr=False)
    proven: frozenset[int] = frozenset()  # nodes writing out= unchecked when arguments are C
    debug: bool = False
    prints: bool = False  # has debug_print steps (their messages wait for the guards)
    unfused: Graph | None = field(default=None, repr=False)  # debug: the graph before fusion
    _checked_run: Any = field(default=None, repr=False)
    profile_next: bool = False  # the next run records per-step times (``explain(profile=True)``)
    _spare: list = field(default_factory=list, repr=False)  # last run's outputs, maybe reused

    @property
    def steps(self) -> int:
        """Kernels and guards executed per call."""
        return len(self.graph.nodes)

    @property
    def predicted_peak(self) -> int | None:
        """Bytes of intermediates and outputs a run allocates at most, None when unplanned."""
        return None if self.memory is None else self.memory.predicted_peak

    def memory_table(self) -> str:
        """The memory plan as printable text (one row per planned value, then the peak).

        Example:
            >>> from dualflow.graph_ir.builder import GraphBuilder
            >>> b = GraphBuilder("f"); b.output(b.input((2,), "float32"))
            >>> lower(b.build(), plan_memory=False).memory_table()
            'memory planning off'
        """
        return "memory planning off" if self.memory is None else self.memory.table()

    def run(self, inputs: list[Any], state: list[Any], profile: bool = False) -> RunResult:
        """Execute the plan; ``inputs``/``state`` are arrays in graph order (not modified, except
        the state arrays of donated updates when lowered with ``donate=True``).

        Example:
            >>> from dualflow.graph_ir.builder import GraphBuilder
            >>> b = GraphBuilder("f"); x = b.input((2,), "float64")
            >>> b.output(*b.node("multiply", [x, 2.0]))
            >>> lower(b.build()).run([np.array([1.0, 2.0])], []).outputs[0].tolist()
            [2.0, 4.0]
        """
        if self._buffers is None:  # first run: resolve once what every later run reuses
            self._xp = self.device.xp
            self._consts = [send(c, self.device) for c in self.graph.consts.values()]
            self._buffers = [] if self.memory is None else self.memory.allocate(self._xp)
        xp, consts = self._xp, self._consts
        if self.profile_next:  # a real call, timed step by step (no donation: commits as usual)
            profile, self.profile_next = True, False
        bufs = self._buffers
        if self.memory is not None and self.memory.fresh:  # large outputs: new arrays per run
            bufs = self.memory.per_run(xp, bufs, self._spare)
        c_ordered = _c_ordered(inputs) and _c_ordered(state)  # else every step checks
        fast = c_ordered and _writable(state, self.donated_slots)
        if profile:  # the same program, timed: donation and unchecked steps as the real run's
            times = self.profile_times = np.zeros(len(self.graph.nodes))
            seen = self.profile_layouts = {}  # matmul steps' operand layouts (gemm_alone)
            run = self._profiled(fast)
            arguments = (inputs, state, consts, bufs, times, seen)
            outputs, updates, failed = self._execute(run, xp, arguments)
        else:
            run = self._run if fast else (self._undonated() if c_ordered else self._checked())
            outputs, updates, failed = self._execute(run, xp, (inputs, state, consts, bufs))
        if failed is not None:  # ``updates`` holds the failed guard's operands
            seen = updates[0] if updates else None
            return RunResult(None, None, self.graph.nodes[failed], _concrete(seen))
        return RunResult(tuple(xp.asarray(o) for o in outputs), updates)

    def _execute(self, run: Any, xp: Any, arguments: tuple) -> tuple:
        """One run: debug_print messages appear only once every guard passed, and an error a
        step raises names that step's op and line rather than the compiled function's caller.
        ``arguments``: inputs, state, consts and the planned buffers of this run."""
        try:
            if not self.prints:
                return run(xp, *arguments)
            with held_messages() as messages:
                result = run(xp, *arguments)
            if result[2] is None and messages:
                sys.stdout.write("".join(m + "\n" for m in messages))
            return result
        except Exception as exc:
            step = step_of(exc, f"<dualflow plan {self.graph.name}>", step_lines(self.source))
            located = None if step is None else relocated(exc, self.graph.nodes[step])
            if located is None:
                raise
            raise located from exc

    def left_state_untouched(self, exc: BaseException) -> bool:
        """Whether a run that raised ``exc`` stopped before any step wrote a state array in
        place (a donated update), so the state is as the call found it. Unknown (the error
        came from no step's line) counts as touched where the plan donates.

        Example:
            >>> from dualflow.graph_ir.builder import GraphBuilder
            >>> b = GraphBuilder("f"); b.output(b.input((2,), "float32"))
            >>> lower(b.build()).left_state_untouched(ValueError("a step's error"))
            True
        """
        if not self.donated:
            return True
        step = raising_step(exc, f"<dualflow plan {self.graph.name}>", step_lines(self.source))
        if step is None:
            return False
        writers = {id(self.graph.producers[new]) for new in self.donated}
        return not any(id(node) in writers for node in self.graph.nodes[: step + 1])

    @property
    def held_bytes(self) -> int:
        """Bytes this plan keeps between runs (0 before its first run): the planned buffers, and
        the last run's outputs that only the plan still references (to be written again).

        Example:
            >>> from dualflow.graph_ir.builder import GraphBuilder
            >>> b = GraphBuilder("f"); x = b.input((256,), "float32")
            >>> (y,) = b.node("exp", [x]); b.output(*b.node("sum", [y], {"axis": None, "keepdims": False}))
            >>> plan = lower(b.build()); _ = plan.run([np.ones(256, np.float32)], []); plan.held_bytes
            1024
        """  # noqa: E501
        if self._buffers is None or self.memory is None:
            return 0
        # the pooled raw buffers (not per-value views) and the outputs the caller dropped
        return self.memory.buffer_bytes + unreferenced_bytes(self._spare)

    def _undonated(self) -> Any:
        # a state array a kernel cannot write out= into (read-only): commit at the end
        if self._undonated_run is None:
            planned = () if self.memory is None else self.memory.planned
            self._undonated_run = _compile(
                self.graph,
                debug=self.debug,
                planned=planned,
                proven=self.proven,
                unfused=self.unfused,
                host=self.device.kind == "cpu",
            )[1]
        return self._undonated_run

    def _checked(self) -> Any:
        # an argument that is not C-ordered: no step's operands are proven C, and no donation
        if self._checked_run is None:
            planned = () if self.memory is None else self.memory.planned
            self._checked_run = _compile(
                self.graph, debug=self.debug, planned=planned, unfused=self.unfused
            )[1]
        return self._checked_run

    def _profiled(self, fast: bool) -> Any:
        # ``fast``: as ``_run`` (donated updates, unchecked proven steps), else as ``_checked``;
        # a profile of another program timed costs the real run never has (a 9 MB update
        # allocated instead of written in place: 27 ms against 1 ms)
        if fast not in self._profiled_runs:
            planned = () if self.memory is None else self.memory.planned
            self._profiled_runs[fast] = _compile(
                self.graph,
                profile=True,
                planned=planned,
                donated=self.donated if fast else None,
                proven=self.proven if fast else frozenset(),
                host=fast and self.device.kind == "cpu",
            )[1]
        return self._profiled_runs[fast]

    def profile_table(self) -> list[tuple[str, str | None, float]]:
        """(op, source line, seconds) per node from the last ``run(profile=True)``."""
        times = getattr(self, "profile_times", np.zeros(len(self.graph.nodes)))
        return [(n.op, n.loc, float(t)) for n, t in zip(self.graph.nodes, times)]


def _c_ordered(arrays: list[Any]) -> bool:
    """Whether every array is C-contiguous (what ``proven`` steps assume of the arguments)."""
    for array in arrays:
        flags = getattr(array, "flags", None)
        if flags is not None and not flags.c_contiguous:
            return False
    return True


def _writable(state: list[Any], slots: tuple[int, ...]) -> bool:
    """Whether every donated state array can take ``out=`` writes (contiguous, writeable)."""
    for k in slots:
        flags = state[k].flags
        if not flags.c_contiguous or not getattr(flags, "writeable", True):
            return False
    return True


def _compile(
    graph: Graph,
    profile: bool = False,
    debug: bool = False,
    planned: tuple = (),
    donated: dict | None = None,
    proven: frozenset[int] = frozenset(),
    unfused: Graph | None = None,
    host: bool = False,
) -> tuple[str, Any]:
    # ``checked`` kernels look at their operands' layout; steps proven C-ordered need not. On the
    # host every call passes numpy: per-node kernels are bound to it now (``host``)
    xp = np if host else None
    kernels = {
        "node": lambda node: node_kernel(node, id(node) not in proven, xp),
        "out": lambda node: out_kernel(node, id(node) not in proven, xp),
        "check": functools.partial(check_finite, unfused=unfused) if debug else None,
        "chain": host and not debug,  # runs of small fused steps as one call (kernel_chain)
    }
    source, namespace = render(graph, kernels, profile, planned, donated)
    exec(compile_plan(source, f"<dualflow plan {graph.name}>"), namespace)
    return source, namespace["run"]


def lower(
    graph: Graph,
    device: Device | str = "cpu",
    debug: bool = False,
    plan_memory: bool = True,
    donate: bool = False,
    unfused: Graph | None = None,
) -> Plan:
    """Turn a graph into a Plan for ``device``; ``plan_memory`` preallocates ``out=`` buffers.

    ``donate`` lets updates that no later step or guard depends on be written straight into
    their state arrays during the run (``runtime/donation.py``); compiled functions use it.
    Without it a run never modifies its inputs or state. ``unfused`` (debug plans): the graph
    before fusion, to name the op inside a fused step that made NaN/Inf.

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2,), "float32"); b.output(*b.node("exp", [x]))
        >>> lower(b.build()).steps
        1
    """
    # A debug plan that can re-run a fused step op by op needs that step's inputs intact after
    # it ran: no buffer sharing (an in-place fused step would have overwritten them).
    if unfused is not None:
        plan_memory = False
    # debug mode checks every step and may raise mid-plan: updates must then be untouched
    donated = donations(graph) if donate and not debug and plan_memory else {}
    memory = _plan_memory(graph, frozenset(donated), Device(device).kind) if plan_memory else None
    planned = () if memory is None else memory.planned
    proven = proven_c_ordered(graph)
    host = Device(device).kind == "cpu"
    source, run = _compile(
        graph,
        debug=debug,
        planned=planned,
        donated=donated,
        proven=proven,
        unfused=unfused,
        host=host,
    )
    slots = tuple(graph.state.index(s) for s in donated.values())
    return Plan(
        graph,
        Device(device),
        source,
        run,
        memory=memory,
        donated_slots=slots,
        donated=donated,
        proven=proven,
        debug=debug,
        prints=any(OPS[n.op].prints for n in graph.nodes),
        unfused=unfused,
    )
