"""Arguments with autograd history: backward inside a compiled call into the caller's graph.

``g_step(G(z))`` passes a tensor whose tape was made before the call; a ``backward()`` inside
continues into that tape. The graph then holds that tape's backward ops, and the values they read
(each tape node's saved arrays) are graph *inputs*, fed at every call from the argument's own
tape — walked in the same order and checked to have the same structure — so the gradients reaching
the caller's parameters are this call's, never the first call's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dualflow.tensor.core import Tensor
from dualflow.tensor.tape import Node


def _saved(node: Node) -> list[Any]:
    """The arrays a tape node keeps for its backward, in a fixed order."""
    values = [*(node.saved_inputs or ()), *(node.saved_outputs or ())]
    return [v.raw_array if isinstance(v, Tensor) else v for v in values if hasattr(v, "shape")]


def walk(roots: list[Tensor]) -> list[Node]:
    """Every tape node reachable from the roots' creators, in backward order (newest first)."""
    seen: dict[int, Node] = {}
    stack = [t.creator for t in roots if t.creator is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen[id(node)] = node
        stack += [e[0] for e in node.edges or () if type(e) is tuple]
    return sorted(seen.values(), key=lambda n: -n.seq)


@dataclass
class HistorySpec:
    """What a trace expects of its arguments' history, and how to feed it to the plan."""

    positions: list[int]  # flat argument positions with a tape
    signature: list[tuple]  # per node: op, saved shapes/dtypes, edges
    inputs: int  # graph inputs the saved arrays fill (after the arguments)
    release: bool  # the traced call freed the tape (backward without retain_graph)
    leaves: list[Any] = field(default_factory=list)  # leaf tensors the tape ends in (kept alive)

    def collect(self, leaves: list[Any]) -> tuple[list[Any] | None, list[Node], str | None]:
        """(saved arrays to feed, the nodes, None) or (None, [], why the history differs)."""
        nodes = walk([leaves[p] for p in self.positions])
        arrays, signature = _describe(nodes, leaves, self.positions)
        if any(node.released for node in nodes):
            return None, [], "an argument's autograd history was already freed by a backward"
        if signature != self.signature:
            return None, [], "an argument's autograd history has another structure"
        return arrays, nodes, None


def _describe(nodes: list[Node], leaves: list[Any], positions: list[int]) -> tuple[list, list]:
    index = {id(n): k for k, n in enumerate(nodes)}
    arguments = {id(leaves[p].raw_array): p for p in positions}
    arrays: list[Any] = []
    fed: dict[int, int] = {}
    signature = []
    for node in nodes:
        saved = []
        for array in _saved(node):
            if id(array) in arguments:
                saved.append(("argument", arguments[id(array)]))
                continue
            if id(array) not in fed:
                fed[id(array)] = len(arrays)
                arrays.append(array)
            saved.append(("input", fed[id(array)], array.shape, str(array.dtype)))
        edges = tuple(
            None
            if e is None
            else (("node", index.get(id(e[0])), e[1]) if type(e) is tuple else ("leaf", id(e)))
            for e in node.edges or ()
        )
        signature.append((node.op.name, tuple(saved), edges))
    return arrays, signature


class ArgumentHistory:
    """The tracer's side: binds the saved arrays of arguments' tapes as graph inputs."""

    def __init__(self, tracer: Any, first_seq: int) -> None:
        self.tracer, self.first_seq = tracer, first_seq
        self.positions: list[int] = []
        self.nodes: list[Node] | None = None
        self.spec: HistorySpec | None = None

    def add_argument(self, tensor: Tensor, position: int) -> None:
        if tensor.creator is not None:
            self.positions.append(position)

    def enter(self, node: Node, leaves: list[Any]) -> None:
        """The backward reached ``node``, made before the call; bind its tape's values once."""
        if node.seq >= self.first_seq:
            return
        if self.nodes is None:
            self._bind(leaves)
        if all(n is not node for n in self.nodes or ()):
            self.tracer.fail_closed(
                f"backward() inside a compiled function reached the autograd history of a "
                f"tensor made outside the call that is not an argument ({node.op.name}); pass "
                "that tensor as an argument, or detach it"
            )

    def _bind(self, leaves: list[Any]) -> None:
        self.nodes = walk([leaves[p] for p in self.positions])
        compiled = [n.op.name for n in self.nodes if n.op.kind == "compiled"]
        if compiled:  # its backward runs a plan on arrays: nothing a graph could record
            self.tracer.fail_closed(
                f"backward() inside a compiled function reaches the output of another compiled "
                f"call ({compiled[0]}) through an argument; compile both steps as one function, "
                "or pass the argument detached and differentiate outside"
            )
        arrays, signature = _describe(self.nodes, leaves, self.positions)
        for k, array in enumerate(arrays):
            self.tracer.bind_saved(array, f"history[{k}]")
        edge_leaves = [e for n in self.nodes for e in n.edges or () if isinstance(e, Tensor)]
        self.spec = HistorySpec(list(self.positions), signature, len(arrays), False, edge_leaves)

    def finish(self) -> HistorySpec | None:
        if self.spec is not None:
            self.spec.release = all(n.released for n in self.nodes or ())
        return self.spec
