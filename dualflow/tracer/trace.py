"""``Trace``: one specialization of a compiled function, as the call path and explain see it.

It is its own module because two producers make traces: tracing a call (``finish_trace`` here,
called by ``compiled``) and loading a stored plan from disk (``plan_load``).
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dualflow._config import config
from dualflow.errors import TracingError
from dualflow.graph_ir.ir import Graph
from dualflow.passes.manager import PassStats
from dualflow.runtime.memory import alias_roots
from dualflow.runtime.plan import Plan
from dualflow.tensor.core import Tensor
from dualflow.tracer.autodiff import Backward, trace_backward
from dualflow.tracer.env_guards import is_value, is_versioned
from dualflow.tracer.environment import finish_environment
from dualflow.tracer.history import HistorySpec
from dualflow.tracer.interpreter import TracingInterpreter
from dualflow.tracer.pipeline import build_plan
from dualflow.tracer.pytree import TreeDef, flatten, rebuilder
from dualflow.tracer.side_effects import Replay
from dualflow.tracer.signature import Flat
from dualflow.tracer.state import StateChecks, plan_device


@dataclass
class Trace:
    """One specialization: the graph, its plan, and what must hold to reuse it."""

    graph: Graph
    plan: Plan
    checks: StateChecks
    update_slots: list[int]
    grad_owners: list[tuple[str, Any]]  # outputs after the user's: new .grad of these slots
    grads_to_none: list[tuple[str, Any]]  # ("state", tensor) or ("input", flat position)
    output_tree: TreeDef  # the result's containers and statics; tensors are its leaves
    n_outputs: int
    described: list[tuple[str, Any]]
    reason: str
    compile_seconds: float
    backward: Backward | None = None
    input_updates: list[int] = field(default_factory=list)  # argument positions written
    const_outputs: list[int] = field(default_factory=list)  # user outputs that are constants
    leaf_index: list[int] = field(default_factory=list)  # user output leaf -> output position
    released_outputs: list[int] = field(default_factory=list)  # require grad, tape consumed
    replay: Replay = field(default_factory=Replay)  # Python side effects redone each call
    commits: bool = False  # writes state, .grad, arguments or Python objects (atomic commit)
    identity_outputs: dict[int, tuple[str, int]] = field(default_factory=dict)
    state_outputs: list[int] = field(default_factory=list)  # alias state the call updates
    history: HistorySpec | None = None  # arguments' autograd history the graph continues into
    pass_stats: list[PassStats] = field(default_factory=list)  # what each pass did
    cache_note: str = ""  # what the plan cache did with it (stored, loaded, or why not)
    source_graph: Graph | None = None  # as traced, before the passes (explain(passes=True))

    @functools.cached_property
    def build_result(self) -> Callable[[list], Any]:
        """The call's result from its output leaves: ``rebuilder(output_tree)``, made once."""
        return rebuilder(self.output_tree)


def is_tensor(value: Any) -> bool:
    """Whether a result leaf is a tensor (an output of the plan) rather than a static value."""
    return isinstance(value, Tensor)


def _unique(leaves: list[Tensor]) -> tuple[list[Tensor], list[int]]:
    # ``return loss, loss`` gives the caller one tensor twice, as eager does
    index: dict[int, int] = {}
    unique: list[Tensor] = []
    for t in leaves:
        if id(t) not in index:
            index[id(t)] = len(unique)
            unique.append(t)
    return unique, [index[id(t)] for t in leaves]


def finish_trace(
    tracer: TracingInterpreter,
    out: Any,
    flat: Flat,
    described: list[tuple[str, Any]],
    reason: str,
    passes: Any,
) -> Trace | None:
    """A finished tracing run as a Trace: outputs, .grad writes, backward, passes and plan.
    None when the run turned out unusable (``tracer.failure`` says why): a side effect that
    cannot be replayed, an environment array changed in place, a fail-closed event."""
    found = _user_outputs(tracer, out)
    if found is None:
        return None
    leaves, leaf_index, output_tree = found
    replay = finish_environment(tracer, leaves, flat.leaves)  # may append side-effect tensors
    if tracer.failure is not None:
        return None
    tracer.builder.output(*(tracer.value_of(t) for t in leaves))
    grad_owners, to_none = _grad_outputs(tracer)
    tracer.builder.output(*tracer.input_updates.values())  # new contents of written arguments
    device = plan_device(flat.leaves, tracer.checks.refs)
    identity = _identity_outputs(tracer, leaves)
    backward = _backward(tracer, leaves, flat, passes, device, identity)
    debug = config.debug or tracer.debug_seen
    source = _live_consts(tracer.builder.build())
    graph, plan, pass_stats = build_plan(source, passes, device, debug=debug, donate=True)
    trace = Trace(
        graph,
        plan,
        tracer.checks,
        [graph.state.index(target) for target, _ in graph.updates],
        grad_owners,
        to_none,
        output_tree,
        len(leaves),
        described,
        reason,
        0.0,
        backward,
    )
    trace.input_updates = list(tracer.input_updates)
    trace.pass_stats, trace.source_graph = pass_stats, source
    trace.leaf_index, trace.replay = leaf_index, replay
    trace.history = tracer.history.finish()
    trace.commits = bool(graph.updates or grad_owners or to_none or trace.input_updates or replay)
    trace.identity_outputs = identity
    _output_facts(trace, leaves)
    _let_go(tracer)
    return trace


def _let_go(tracer: TracingInterpreter) -> None:
    """Drop what the finished tracer holds of its run: its arrays (kept alive while tracing so
    their ids stay unique), tape nodes, and the state copies a rollback would have restored.
    Nothing should hold the tracer now, but if something does, it holds none of these."""
    tracer.arrays.clear()
    tracer.tape_locs.clear()
    tracer.backups.clear()
    tracer.grad_backups.clear()
    tracer.restores.clear()


def _user_outputs(tracer: TracingInterpreter, out: Any) -> tuple[list, list, TreeDef] | None:
    """The result's distinct tensors, each leaf's index among them, and the result's TreeDef;
    None (the trace failed closed) for containers a plan cannot rebuild exactly."""
    try:
        leaves, _, output_tree = flatten(out, "result", is_leaf=is_tensor)
    except TracingError as exc:  # eager it is, not a plain dict where eager gave another type
        tracer.fail_closed(str(exc))
        return None
    for value in _statics(output_tree):
        if not _reusable(tracer, value):
            tracer.fail_closed(
                f"the compiled function returns a {type(value).__name__} it made (or read through "
                "code the compiler cannot follow); a plan would hand back the first call's "
                "object at every call. Return tensors and plain values in tuples, lists, dicts, "
                "namedtuples or dataclasses"
            )
            return None
    return (*_unique(leaves), output_tree)


def _statics(tree: TreeDef) -> list[Any]:
    """The non-tensor leaves a result's TreeDef keeps as they were while tracing."""
    if tree.kind == "static":
        return [tree.data]
    return [value for child in tree.children for value in _statics(child)]


def _reusable(tracer: TracingInterpreter, value: Any) -> bool:
    """Whether a plan may return ``value`` itself at every call: a plain value, or an object
    of the environment the trace reached by name (the same object eager returns)."""
    if is_value(value) or isinstance(value, types.ModuleType | types.FunctionType | type):
        return True
    return is_versioned(value) or tracer.env.label_of(value) is not None


def _backward(
    tracer: TracingInterpreter, leaves: list, flat: Flat, passes: Any, device: Any, skip: dict
) -> Backward | None:
    """The backward graph of the outputs (grad mode only); its residuals become outputs."""
    if not config.grad_enabled:
        return None
    backward = trace_backward(tracer, leaves, flat.leaves, passes, device, skip=skip)
    if backward is not None:
        tracer.builder.output(*backward.residuals)  # what the backward graph reads
    return backward


def _grad_outputs(tracer: TracingInterpreter) -> tuple[list, list]:
    """The ``.grad`` slots the call wrote: (slots set, each a graph output; slots set to None)."""
    grad_owners, to_none = [], []
    for owner in tracer.grad_written.values():
        slot = tracer.grad_slot(owner)
        if owner.raw_grad is None:
            to_none.append(slot)
        else:
            grad_owners.append(slot)
            tracer.builder.output(tracer.value_of(owner.raw_grad))
    return grad_owners, to_none


def _output_facts(trace: Trace, leaves: list[Tensor]) -> None:
    """Which user outputs are released from the tape, constants, or views of updated state."""
    graph = trace.graph
    trace.released_outputs = [
        i
        for i, t in enumerate(leaves)
        if t.requires_grad and t.creator is not None and t.creator.released
    ]
    trace.const_outputs = [
        i for i, v in enumerate(graph.outputs[: len(leaves)]) if v in graph.consts
    ]
    trace.state_outputs = _outputs_of_updated_state(graph, len(leaves))


def _identity_outputs(
    tracer: TracingInterpreter, leaves: list[Tensor]
) -> dict[int, tuple[str, int]]:
    """Outputs that *are* an argument or a captured tensor: the call returns that very object
    (as eager does), so gradients flow through the caller's graph and writes show in it."""
    found = {}
    for i, t in enumerate(leaves):
        position = tracer.input_positions.get(id(t))
        slot = tracer.slots.get(id(t))
        if position is not None:
            found[i] = ("input", position)
        elif (
            slot is not None
            and tracer.checks.refs[slot].kind == "tensor"
            and (tracer.checks.refs[slot].tensor is t)
        ):
            found[i] = ("state", slot)
    return found


def _live_consts(graph: Graph) -> Graph:
    """``graph`` without the constants nothing reads: data the tracing run made and replaced
    (``dualflow.tensor(array_argument)`` becomes a ``cast`` of the argument, and the first call's
    copy a dead constant), which the trace would keep for its lifetime as its graph as traced
    (issue 36); the passes would drop them from the plan's graph anyway."""
    used = graph.last_use
    if all(v in used for v in graph.consts):
        return graph
    return graph.replace(consts={v: a for v, a in graph.consts.items() if v in used})


def _outputs_of_updated_state(graph: Graph, n: int) -> list[int]:
    """User outputs whose array is (a view of) a state array this call updates: copied before
    the commit writes the state, so they keep the values they had when computed."""
    updated = {state for state, _ in graph.updates}
    aliases = alias_roots(graph, with_state=True)
    return [i for i, v in enumerate(graph.outputs[:n]) if aliases.get(v, set()) & updated]


def born_state_kept(tracer: TracingInterpreter, out: Any) -> bool:
    """Whether a tensor born and written in the call outlives it outside its result (an
    optimizer buffer stored in ``opt.state``): a plan would write a fresh one every call."""
    try:
        returned = {id(t) for t in flatten(out, "result", is_leaf=is_tensor)[0]}
    except TracingError:  # a result pytree refuses: count nothing returned (drop the trace)
        returned = set()
    return any(ref() is not None and id(ref()) not in returned for ref in tracer.born)
