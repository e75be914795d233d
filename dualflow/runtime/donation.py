"""Donation: which state updates a plan may write straight into the state's own array.

A compiled call commits its updates at the end (all or nothing), so every new parameter and
optimizer value would be alive at once. An update whose step comes after the last guard, whose
old value nothing reads later, and whose step can write ``out=`` is written in place instead.
"""

from __future__ import annotations

from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.ops.registry import OPS
from dualflow.ops.value_errors import may_raise_on_values
from dualflow.runtime.aliasing import alias_roots
from dualflow.runtime.out_forward import inplace_inputs, writes_out, writes_outs


def _may_stop(node: Node) -> bool:
    """Whether the run may end at this step without committing: a guard, or a step whose
    forward can raise on the integers it reads (an out-of-range label or index, a negative
    integer power: any op reading integers may, so this is no per-op fact)."""
    op = OPS.get(node.op)
    if op is not None and op.guard:
        return True
    return may_raise_on_values(v.dtype for v in node.value_inputs)


def donations(graph: Graph) -> dict[Value, Value]:
    """Update value -> the state value its step may write into directly.

    Only after the last guard (a failing guard must leave state untouched) and the last step
    that may raise on its data (any step reading integers: labels, indices), never for a value
    the call also returns, and only when no later step reads the old state (or a view of it).

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("sgd"); g = b.input((4,), "float32"); w = b.add_state((4,), "float32")
        >>> (new,) = b.node("subtract", [w, g]); b.update(w, new)
        >>> donations(b.build()) == {new: w}
        True
    """
    last_guard = max((i for i, n in enumerate(graph.nodes) if _may_stop(n)), default=-1)
    aliases = alias_roots(graph, with_state=True)  # state values: the owners of interest
    last_read: dict[Value, int] = {}
    for i, node in enumerate(graph.nodes):
        for v in node.value_inputs:
            for s in aliases.get(v, ()):
                last_read[s] = i
    index = {id(n): i for i, n in enumerate(graph.nodes)}
    returned = set(graph.outputs)
    # a returned value that is the old state (or a view of it: ``w * 1`` folded to ``w``) must
    # keep the old values the caller receives: that state is not overwritten in place
    returned_states = set().union(*(aliases.get(v, ()) for v in graph.outputs))
    found: dict[Value, Value] = {}
    for state, new in graph.updates:
        producer = graph.producers.get(new)
        if producer is None or new in returned or new in found or state in returned_states:
            continue
        if not _writes_into(producer, new):
            continue
        step = index[id(producer)]
        if step <= last_guard or last_read.get(state, -1) > step:
            continue
        readers = [v for v in producer.value_inputs if state in aliases.get(v, ())]
        output = producer.outputs.index(new)
        if readers and (
            state not in inplace_inputs(producer, output) or any(v is not state for v in readers)
        ):
            continue  # only a per-index kernel reading the state itself may overwrite it
        found[new] = state
    return found


def _writes_into(producer: Node, new: Value) -> bool:
    # a single-output step writing out=, or one result of a step writing a tuple of out=
    if producer.outputs == (new,):
        return writes_out(producer)
    return writes_outs(producer)
