"""``interpret``: the reference interpreter, running a graph node by node with each op's forward.

It is the ground truth that optimization passes and the plan runtime are tested against; it
favours obviousness over speed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.ops.registry import OPS


@dataclass
class Interpretation:
    """What a run produced: outputs, the new content of each state value, failed guards."""

    outputs: list[Any]
    state: list[Any]
    failed_guards: list[Node]


def guard_holds(node: Node, array: Any) -> bool:
    """Whether a guard's recorded expectation holds for ``array`` (its op's forward).

    Example:
        >>> from dualflow.graph_ir.ir import Node, Value
        >>> g = Node("guard", (Value(0, (), "bool"),), (), {"expect": True, "kind": "bool"})
        >>> guard_holds(g, np.array(True)), guard_holds(g, np.array(False))
        (True, False)
    """
    return bool(OPS[node.op].forward(np, array, **node.attrs))


def run_node(node: Node, args: list[Any], xp: Any = np) -> tuple[Any, ...]:
    """Run one (non-guard) node's op on concrete arguments; returns its outputs as a tuple."""
    op = OPS[node.op]
    out = op.forward(xp, *args, **node.attrs)
    outs = tuple(out) if op.nout > 1 else (out,)
    return tuple(xp.asarray(o) for o in outs)


def interpret(graph: Graph, inputs: list[Any], state: list[Any] | None = None) -> Interpretation:
    """Run ``graph`` on ``inputs`` (and ``state``, default: zeros) without modifying them.

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2,), "float64")
        >>> b.output(*b.node("multiply", [x, 3.0]))
        >>> interpret(b.build(), [np.array([1.0, 2.0])]).outputs[0].tolist()
        [3.0, 6.0]
    """
    state = state if state is not None else [np.zeros(v.shape, v.dtype) for v in graph.state]
    env: dict[Value, Any] = dict(zip(graph.inputs, inputs))
    env.update(zip(graph.state, state))
    env.update(graph.consts)
    failed = []
    for node in graph.nodes:
        args = [env[v] if isinstance(v, Value) else v for v in node.inputs]
        if OPS[node.op].guard:
            if not guard_holds(node, args[0]):
                failed.append(node)
            continue
        env.update(zip(node.outputs, run_node(node, args)))
    new_state = dict(zip(graph.state, state))
    new_state.update({target: env[new] for target, new in graph.updates})
    return Interpretation(
        [env[v] for v in graph.outputs], [new_state[v] for v in graph.state], failed
    )
