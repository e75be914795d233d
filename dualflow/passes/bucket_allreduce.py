"""Overlap collectives with other work: each op with a ``split`` fact (``allreduce``) becomes its
start (``allreduce_start``), issued as soon as its input can exist, and its wait
(``allreduce_wait``), just before the first reader of its result.

Starts keep their relative order, and so do waits (every rank issues collectives in one order);
effectful nodes (guards, state writes, RNG) are barriers nothing moves across.

Before::

    graph step(%0: float32[4] "x") {
      %1: float32[4] = exp(%0)  # s.py:1
      %2: float32[4] = tanh(%0)  # s.py:2
      %3: float32[4] = multiply(%1, %2)  # s.py:3
      %4: float32[4] = negative(%3)  # s.py:4
      %5: float32[8] = concat(%1, %2) {axis=0}  # s.py:5
      %6: float32[8] = allreduce(%5) {comm=1, reduction='mean'}  # s.py:6
      %7: float32[4] = allreduce(%3) {comm=1, reduction='sum'}  # s.py:7
      %8: float32[4] = add(%4, %4)  # s.py:8
      %9: float32[4] = add(%7, %8)  # s.py:9
      return %6, %9
    }

After::

    graph step(%0: float32[4] "x") {
      %1: float32[4] = exp(%0)  # s.py:1
      %2: float32[4] = tanh(%0)  # s.py:2
      %5: float32[8] = concat(%1, %2) {axis=0}  # s.py:5
      %10: int64[] = allreduce_start(%5) {comm=1, reduction='mean'}  # s.py:6
      %3: float32[4] = multiply(%1, %2)  # s.py:3
      %11: int64[] = allreduce_start(%3) {comm=1, reduction='sum'}  # s.py:7
      %4: float32[4] = negative(%3)  # s.py:4
      %8: float32[4] = add(%4, %4)  # s.py:8
      %6: float32[8] = allreduce_wait(%10, %5) {comm=1}  # s.py:6
      %7: float32[4] = allreduce_wait(%11, %3) {comm=1}  # s.py:7
      %9: float32[4] = add(%7, %8)  # s.py:9
      return %6, %9
    }

The pure nodes an all-reduce's input needs (the packing ``reshape``/``concat`` of a bucket) move
up with its start. While requests are in flight, an ``allreduce_progress`` follows each step that
writes at least ``PROGRESS_ELEMENTS`` elements (none in this small example): MPI progresses a
non-blocking transfer only inside MPI calls, so these tests keep it moving without a thread. The
wait reads the start's input too, so liveness keeps that buffer (which MPI reads while the request
is in flight) until the wait.
"""

from __future__ import annotations

import math

from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.graph_ir.rewrite import is_effectful
from dualflow.ops.registry import OPS


def _splits(node: Node) -> bool:
    """Whether the node is a collective this pass splits into a start and a wait."""
    return OPS[node.op].split is not None


def _split(reduce: Node, value_id: int) -> tuple[Node, Node]:
    """The start and wait replacing one split collective (the wait defines its old output);
    the start takes the op's attrs, the wait (and later progress tests) its communicator."""
    (x,), (y,) = reduce.inputs, reduce.outputs
    start_op, wait_op, _ = OPS[reduce.op].split
    handle = Value(value_id, (), "int64")
    start = Node(start_op, (x,), (handle,), dict(reduce.attrs), reduce.loc)
    wait = Node(wait_op, (handle, x), (y,), {"comm": reduce.attrs["comm"]}, reduce.loc)
    return start, wait


def _start_slots(graph: Graph) -> dict[Node, int]:
    """Allreduce node -> index of the original node after which its start can be issued.

    A value is ready after its latest effectful ancestor (-1: at entry); pure nodes can be
    recomputed anywhere after that, but never above an effectful node that preceded them.
    Slots never decrease from one all-reduce to the next, which keeps the starts in order.
    """
    ready: dict[Value, int] = {}
    slots: dict[Node, int] = {}
    barrier, previous = -1, -1
    for index, node in enumerate(graph.nodes):
        earliest = max((ready.get(v, -1) for v in node.value_inputs), default=-1)
        if _splits(node):
            previous = slots[node] = max(earliest, barrier, previous)
            ready[node.outputs[0]] = previous
        elif is_effectful(node):
            barrier = index
            ready.update((v, index) for v in node.outputs)
        else:
            ready.update((v, max(earliest, barrier)) for v in node.outputs)
    return slots


class _Schedule:
    """Builds the new node order: original order, cones hoisted to their start, waits on demand."""

    def __init__(self, graph: Graph, pairs: dict[Node, tuple[Node, Node]]) -> None:
        self.graph, self.pairs = graph, pairs
        self.position = {node: i for i, node in enumerate(graph.nodes)}
        self.waits = [wait for _, wait in pairs.values()]  # in original (= issue) order
        self.wait_of = {wait.outputs[0]: i for i, wait in enumerate(self.waits)}
        self.started = self.waited = 0
        self.order: list[Node] = []
        self.emitted: set[Node] = set()

    def flush(self, upto: int) -> None:
        """Emit every wait up to number ``upto`` not emitted yet (waits stay in order)."""
        while self.waited <= min(upto, self.started - 1):
            self.order.append(self.waits[self.waited])
            self.waited += 1

    def emit(self, node: Node) -> None:
        """Append ``node`` after the waits of any all-reduce result it reads."""
        for v in node.value_inputs:
            if v in self.wait_of:
                self.flush(self.wait_of[v])
        self.order.append(node)
        self.emitted.add(node)

    def hoist(self, reduce: Node) -> None:
        """Emit the not-yet-emitted pure nodes ``reduce``'s input needs, then its start."""
        cone: set[Node] = set()
        stack = [reduce.inputs[0]]
        while stack:
            node = self.graph.producers.get(stack.pop())
            if node is None or node in cone or node in self.emitted or _splits(node):
                continue
            cone.add(node)
            stack.extend(node.value_inputs)
        for node in sorted(cone, key=self.position.__getitem__):
            self.emit(node)
        self.emit(self.pairs[reduce][0])
        self.started += 1

    def run(self, slots: dict[Node, int]) -> list[Node]:
        """The whole schedule: walk the original order, hoisting each start into its slot."""
        pending = list(slots)  # all-reduces in original order, slots non-decreasing
        while pending and slots[pending[0]] < 0:
            self.hoist(pending.pop(0))
        for index, node in enumerate(self.graph.nodes):
            if not _splits(node) and node not in self.emitted:
                if is_effectful(node):
                    self.flush(len(self.waits))  # nothing in flight crosses a barrier
                self.emit(node)
            while pending and slots[pending[0]] == index:
                self.hoist(pending.pop(0))
        self.flush(len(self.waits))
        return self.order


PROGRESS_ELEMENTS = 1 << 14  # a step writing this many elements is worth a progress test after


def _with_progress(order: list[Node], next_id: int, progress: dict[Node, str]) -> list[Node]:
    """``order`` with an ``allreduce_progress`` after each large step while requests fly
    (``progress``: each start node's progress op).

    MPICH moves a non-blocking all-reduce only inside MPI calls: these tests are what lets
    the transfer proceed during backward without a helper thread.
    """
    out: list[Node] = []
    in_flight: dict[Value, Node] = {}  # handle -> its start, in start order
    for node in order:
        out.append(node)
        role = OPS[node.op].async_role
        if role == "start":
            in_flight[node.outputs[0]] = node
        elif role == "wait":
            in_flight.pop(node.inputs[0], None)
        elif in_flight and sum(math.prod(v.shape) for v in node.outputs) >= PROGRESS_ELEMENTS:
            handle, start = next(reversed(in_flight.items()))
            token = Value(next_id, (), "int64")
            next_id += 1
            attrs = {"comm": start.attrs["comm"]}
            out.append(Node(progress[start], (handle,), (token,), attrs, node.loc))
    return out


def bucket_allreduce(graph: Graph) -> Graph:
    """Split every ``allreduce`` (op with a ``split``) into an early start and a late wait;
    ``graph`` itself if none.

    Example:
        >>> from dualflow.graph_ir import GraphBuilder
        >>> from dualflow.distributed import create_communicator
        >>> comm = create_communicator("loopback")
        >>> b = GraphBuilder("f"); x = b.input((2,), "float32")
        >>> (g,) = b.node("exp", [x]); (t,) = b.node("tanh", [x])
        >>> (r,) = b.node("allreduce", [g], {"comm": comm.comm_id, "reduction": "sum"})
        >>> b.output(*b.node("add", [r, t]))
        >>> [n.op for n in bucket_allreduce(b.build()).nodes]
        ['exp', 'allreduce_start', 'tanh', 'allreduce_wait', 'add']
    """
    reduces = [n for n in graph.nodes if _splits(n)]
    if not reduces:
        return graph
    values = [*graph.inputs, *graph.state, *graph.consts]
    next_id = max((v.id for v in values + [v for n in graph.nodes for v in n.outputs]), default=-1)
    pairs = {node: _split(node, next_id + 1 + i) for i, node in enumerate(reduces)}
    order = _Schedule(graph, pairs).run(_start_slots(graph))
    progress = {start: OPS[node.op].split[2] for node, (start, _) in pairs.items()}
    order = _with_progress(order, next_id + 1 + len(reduces), progress)
    return graph.replace(nodes=tuple(order))
