"""``verify`` catches every IR invariant it promises (SSA, order, infer agreement, known ops,
plain attrs, guards, outputs, updates, collective ordering) with a message that says how to fix it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from dualflow.graph_ir import Graph, GraphVerifyError, Node, Value, verify
from tests.graph_ir.graphs import everything


def _graph() -> Graph:
    return verify(everything())


def _swap_node(graph: Graph, index: int, node: Node) -> Graph:
    nodes = list(graph.nodes)
    nodes[index] = node
    return graph.replace(nodes=tuple(nodes))


def _redefine_input(g: Graph) -> Graph:
    first = g.nodes[0]
    clash = Value(g.inputs[0].id, first.outputs[0].shape, first.outputs[0].dtype)
    return _swap_node(g, 0, Node(first.op, first.inputs, (clash,), first.attrs, first.loc))


def _redefine_twice(g: Graph) -> Graph:
    node = g.nodes[1]
    return g.replace(nodes=(*g.nodes[:2], node, *g.nodes[2:]))


def _use_before_def(g: Graph) -> Graph:
    return g.replace(nodes=(g.nodes[0], g.nodes[2], g.nodes[1], *g.nodes[3:]))


def _foreign_value(g: Graph) -> Graph:
    node = g.nodes[1]
    stranger = Value(999, (2, 4), "float64")
    return _swap_node(g, 1, Node(node.op, (stranger,), node.outputs, node.attrs, node.loc))


def _infer_shape(g: Graph) -> Graph:
    node = g.nodes[1]
    wrong = Value(node.outputs[0].id, (3,), "float64")
    return _swap_node(g, 1, Node(node.op, node.inputs, (wrong,), node.attrs, node.loc))


def _infer_dtype(g: Graph) -> Graph:
    node = g.nodes[1]
    wrong = Value(node.outputs[0].id, (2,), "float32")
    return _swap_node(g, 1, Node(node.op, node.inputs, (wrong,), node.attrs, node.loc))


def _output_count(g: Graph) -> Graph:
    node = g.nodes[7]  # batch_norm has three outputs
    return _swap_node(g, 7, Node(node.op, node.inputs, node.outputs[:1], node.attrs, node.loc))


def _infer_rejects(g: Graph) -> Graph:
    node = g.nodes[6]  # transpose
    return _swap_node(g, 6, Node(node.op, node.inputs, node.outputs, {"axes": (0, 0)}, node.loc))


def _unknown_op(g: Graph) -> Graph:
    node = g.nodes[1]
    return _swap_node(g, 1, Node("frobnicate", node.inputs, node.outputs, {}, node.loc))


def _callable_attr(g: Graph) -> Graph:
    node = g.nodes[1]
    attrs = {**node.attrs, "axis": lambda: -1}
    return _swap_node(g, 1, Node(node.op, node.inputs, node.outputs, attrs, node.loc))


def _bad_guard(g: Graph) -> Graph:
    index = g.nodes.index(g.guards[0])
    node = g.nodes[index]
    return _swap_node(g, index, Node("guard", node.inputs, (), {"expect": 1, "kind": "len"}))


def _undefined_output(g: Graph) -> Graph:
    return g.replace(outputs=(*g.outputs, Value(998, (), "float64")))


def _update_not_state(g: Graph) -> Graph:
    return g.replace(updates=((g.inputs[0], g.nodes[-2].outputs[0]),))


def _update_twice(g: Graph) -> Graph:
    return g.replace(updates=g.updates + g.updates)


def _update_type(g: Graph) -> Graph:
    return g.replace(updates=((g.state[0], g.nodes[1].outputs[0]),))  # float64[2] into [4]


def _update_undefined(g: Graph) -> Graph:
    return g.replace(updates=((g.state[0], Value(997, (4,), "float64")),))


BREAKS: list = [
    ("redefined input id", _redefine_input, "defined twice"),
    ("node repeated", _redefine_twice, "defined twice"),
    ("use before def", _use_before_def, "used before it is defined"),
    ("undefined operand", _foreign_value, "used before it is defined"),
    ("infer shape", _infer_shape, "infer gives"),
    ("infer dtype", _infer_dtype, "infer gives"),
    ("output count", _output_count, "outputs"),
    ("infer rejects", _infer_rejects, "infer rejects"),
    ("unknown op", _unknown_op, "unknown op 'frobnicate'"),
    ("callable attr", _callable_attr, "not plain data"),
    ("bad guard", _bad_guard, "guard"),
    ("undefined output", _undefined_output, "never defined"),
    ("update target", _update_not_state, "not a state value"),
    ("update twice", _update_twice, "updated twice"),
    ("update type", _update_type, "changes type"),
    ("update source", _update_undefined, "never defined"),
]


def test_the_base_graph_is_valid() -> None:
    assert _graph().name == "everything"


@pytest.mark.parametrize(
    "name,breaker,problem", BREAKS, ids=[getattr(b, "values", b)[0] for b in BREAKS]
)
def test_each_broken_invariant_is_reported_with_a_fix(
    name: str, breaker: Callable[[Graph], Graph], problem: str
) -> None:
    with pytest.raises(GraphVerifyError) as info:
        verify(breaker(_graph()))
    message = str(info.value)
    assert problem in message, message
    assert "\n  fix: " in message, message


def test_errors_show_the_offending_node() -> None:
    with pytest.raises(GraphVerifyError, match=r"node: %5: float32\[2\] = sum\(%0\)"):
        verify(_infer_dtype(_graph()))


def _collective_graph(waits: int = 1, swap_x: bool = False) -> Graph:
    from dualflow.distributed import create_communicator
    from dualflow.graph_ir import GraphBuilder

    comm = create_communicator("loopback").comm_id
    b = GraphBuilder("collectives")
    x, y = b.input((3,), "float32", "x"), b.input((3,), "float32", "y")
    (handle,) = b.node("allreduce_start", [x], {"comm": comm, "reduction": "sum"})
    outs = [
        b.node("allreduce_wait", [handle, y if swap_x else x], {"comm": comm})[0]
        for _ in range(waits)
    ]
    b.output(*(outs or [x]))
    return b.build()


def test_collectives_waited_once_after_their_start_are_valid() -> None:
    verify(_collective_graph())


@pytest.mark.parametrize(
    "waits,swap_x,problem",
    [
        (0, False, "started but never waited"),
        (2, False, "waited twice"),
        (1, True, "same array and communicator"),
    ],
)
def test_broken_collective_ordering_is_reported(waits: int, swap_x: bool, problem: str) -> None:
    with pytest.raises(GraphVerifyError, match=problem) as info:
        verify(_collective_graph(waits, swap_x))
    assert "\n  fix: " in str(info.value)


def test_a_wait_on_a_foreign_handle_is_reported() -> None:
    g = _collective_graph()
    start, wait = g.nodes
    fake = Value(900, (), "int64")  # an int64[] input posing as a handle
    g2 = g.replace(
        inputs=(*g.inputs, fake),
        nodes=(start, Node(wait.op, (fake, wait.inputs[1]), wait.outputs, wait.attrs, None)),
    )
    with pytest.raises(GraphVerifyError, match="not the output of an earlier allreduce_start"):
        verify(g2)
