"""The search behind the ``remat`` pass: a liveness profile of a schedule as the memory planner
sees it, and greedy choices of values to compute again before their late uses.

At the step where the most bytes are alive, every value alive across that step but not read by
it is a candidate: its late readers (after the step) could read a copy computed just before the
first of them, so the value dies after its last early use. Making the copy may need other
values at that point: each is either there anyway, kept alive longer (bytes), or itself
computed again (time, ``remat_cost``), whichever costs fewer bytes. Candidates are tried
cheapest first (time per byte saved: views, elementwise ops and batch norms before convolutions
and matmuls) and one is taken when the re-planned profile shows a lower peak.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.graph_ir.rewrite import rebuild, rewire
from dualflow.ops.registry import OPS
from dualflow.ops.value_errors import may_raise_on_values
from dualflow.passes.remat_cost import node_cost
from dualflow.runtime.aliasing import alias_roots
from dualflow.runtime.donation import donations

MAX_DEPTH = 6  # how far back a chain of copies may reach (a conv, its bias, BN, ReLU, a view)
TRIES = 8  # candidates tried at one peak before giving up on it


def recomputable(node: Node) -> bool:
    """Whether a node may run again later with the same result: a pure op with outputs, reading
    no integers (a step that may raise on labels or indices stays where it was, which keeps the
    donation of later updates as it was) and no host output (``prints``).

    Example:
        >>> x = Value(0, (2,), "float32")
        >>> recomputable(Node("exp", (x,), (Value(1, (2,), "float32"),)))
        True
    """
    op = OPS.get(node.op)
    if op is None or op.impure or op.guard or op.prints or not node.outputs:
        return False
    return not may_raise_on_values(v.dtype for v in node.value_inputs)


def _scratch(node: Node) -> int:
    op = OPS.get(node.op)
    return 0 if op is None or op.scratch is None else int(op.scratch(node.input_metas, node.attrs))


@dataclass
class Profile:
    """Bytes alive at each step of ``graph`` (memory-owning node outputs, donated updates
    excepted, plus the CPU kernels' scratch), as the memory planner counts them."""

    graph: Graph
    live: np.ndarray
    roots: dict[Value, frozenset[Value]]
    release: dict[Value, int]
    aliases: dict[Value, list[Value]]  # owner -> the values sharing its memory, itself first
    donated: frozenset[Value] = frozenset()

    @property
    def peak(self) -> int:
        """The most bytes alive at one step."""
        return int(self.live.max(initial=0))

    @property
    def score(self) -> tuple[int, int]:
        """(peak, steps at the peak): what an accepted rewrite must lower."""
        peak = self.peak
        return peak, int(np.count_nonzero(self.live == peak))

    @cached_property
    def index(self) -> dict[int, int]:
        """id(node) -> its step."""
        return {id(n): i for i, n in enumerate(self.graph.nodes)}


def profile(graph: Graph) -> Profile:
    """The liveness profile of ``graph``'s schedule.

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((4,), "float32")
        >>> (y,) = b.node("exp", [x]); (z,) = b.node("tanh", [y]); b.output(z)
        >>> profile(b.build()).live.tolist()
        [16, 32]
    """
    donated = frozenset(donations(graph))
    roots = alias_roots(graph)
    defined = {v: i for i, n in enumerate(graph.nodes) for v in n.outputs}
    last_use = graph.last_use
    release = dict(defined)
    aliases: dict[Value, list[Value]] = {}
    for value, owners in roots.items():
        end = last_use.get(value, defined[value])
        for owner in owners:
            release[owner] = max(release[owner], end)
            aliases.setdefault(owner, []).append(value)
    live = np.zeros(len(graph.nodes) + 2, dtype=np.int64)
    for step, node in enumerate(graph.nodes):
        for v in node.outputs:
            if v in roots[v] and v not in donated:
                live[step] += v.nbytes
                live[release[v] + 1] -= v.nbytes
        scratch = _scratch(node)
        live[step] += scratch
        live[step + 1] -= scratch
    return Profile(graph, np.cumsum(live)[: len(graph.nodes)], roots, release, aliases, donated)


@dataclass
class Choice:
    """How one candidate would be freed: per (value, step) needed, "have" (alive there anyway),
    "keep" (kept alive until then) or "clone" (computed again), with its bytes and cost (FLOPs
    of time, ``remat_cost.node_cost``)."""

    owner: Value
    late: list[tuple[int, Value]]  # (first late step, alias of the owner read there)
    how: dict[tuple[Value, int], tuple[str, int, int]] = field(default_factory=dict)
    extra_bytes: int = 0
    cost: int = 0

    @property
    def gain(self) -> int:
        """Bytes the peak step would lose, as estimated."""
        return self.owner.nbytes - self.extra_bytes


class _Planner:
    """Prices making ``value`` available at ``step`` with ``owner`` freed early (memoized)."""

    def __init__(self, prof: Profile, owner: Value) -> None:
        self.prof, self.owner = prof, owner
        self.how: dict[tuple[Value, int], tuple[str, int, int] | None] = {}

    def price(self, value: Value, step: int, depth: int = 0) -> tuple[str, int, int] | None:
        key = (value, step)
        if key not in self.how:
            self.how[key] = self._price(value, step, depth)
        return self.how[key]

    def _price(self, value: Value, step: int, depth: int) -> tuple[str, int, int] | None:
        prof = self.prof
        producer = prof.graph.producers.get(value)
        if producer is None:  # an input, state or constant: always there
            return "have", 0, 0
        owners = prof.roots[value]
        freed = self.owner in owners
        defined_before = prof.index[id(producer)] < step
        if defined_before and not freed and all(prof.release[o] >= step for o in owners):
            return "have", 0, 0
        options = []
        if defined_before and not freed:
            options.append(("keep", sum(o.nbytes for o in owners if prof.release[o] < step), 0))
        if depth < MAX_DEPTH and recomputable(producer):
            extra, cost = 0, node_cost(producer)
            for w in producer.value_inputs:
                sub = self.price(w, step, depth + 1)
                if sub is None:
                    break
                extra, cost = extra + sub[1], cost + sub[2]
            else:
                options.append(("clone", extra, cost))
        return min(options, key=lambda o: (o[1], o[2])) if options else None


def candidates(prof: Profile, step: int) -> list[Value]:
    """Owners alive across ``step`` (defined before, read after) that it does not read, whose
    producer may run again, and that no output or update keeps alive to the end."""
    graph, end = prof.graph, len(prof.graph.nodes)
    read = set().union(*(prof.roots.get(v, ()) for v in graph.nodes[step].value_inputs))
    found = []
    for node in graph.nodes[:step]:
        for v in node.outputs:
            alive = v in prof.roots[v] and step < prof.release[v] < end
            if alive and v not in read and v not in prof.donated and recomputable(node):
                found.append(v)
    return found


def choose(prof: Profile, owner: Value, step: int) -> Choice | None:
    """The cheapest way to free ``owner`` across ``step``, or None when there is none."""
    index, late = prof.index, []
    for alias in prof.aliases[owner]:
        after = [index[id(n)] for n in prof.graph.users.get(alias, ()) if index[id(n)] > step]
        if after:
            late.append((min(after), alias))
    late.sort(key=lambda t: t[0])
    planner = _Planner(prof, owner)
    choice = Choice(owner, late)
    for first, alias in late:
        priced = planner.price(alias, first)
        if priced is None or priced[0] != "clone":
            return None
        choice.extra_bytes += priced[1]
        choice.cost += priced[2]
    producer = prof.graph.producers[owner]
    if not _read_by(prof, producer, step):  # moved, not copied: the original goes
        choice.cost -= node_cost(producer)
    choice.how = {k: v for k, v in planner.how.items() if v is not None}
    return choice if late and choice.gain > 0 else None


def _read_by(prof: Profile, node: Node, step: int) -> bool:
    """Whether a step up to ``step`` reads an output of ``node``, or the graph returns one."""
    returned = set(prof.graph.outputs) | {new for _, new in prof.graph.updates}
    users = prof.graph.users
    return any(
        v in returned or any(prof.index[id(n)] <= step for n in users.get(v, ()))
        for v in node.outputs
    )


class _Copier:
    """Builds the copies a Choice asks for, each just before the step that first needs it."""

    def __init__(self, prof: Profile, choice: Choice, next_id: int) -> None:
        self.prof, self.choice, self.next_id = prof, choice, next_id
        self.copies: dict[Value, Value] = {}  # original -> copy (made at an earlier step)
        self.inserts: dict[int, list[Node]] = {}  # step -> copies placed before it
        self.made: list[Node] = []
        self.origins: dict[Value, Value] = {}  # a copy's output -> the value it computes again

    def value_at(self, value: Value, step: int) -> Value:
        if value in self.copies:
            return self.copies[value]
        how = self.choice.how.get((value, step))
        if how is None or how[0] != "clone":
            return value
        node = self.prof.graph.producers[value]
        inputs = tuple(self.value_at(v, step) if isinstance(v, Value) else v for v in node.inputs)
        outputs = []
        for v in node.outputs:
            outputs.append(Value(self.next_id, v.shape, v.dtype, v.name))
            self.next_id += 1
        copy = Node(node.op, inputs, tuple(outputs), node.attrs, node.loc, True)
        self.copies.update(zip(node.outputs, outputs))
        self.inserts.setdefault(step, []).append(copy)
        self.made.append(copy)
        self.origins.update(zip(outputs, node.outputs))
        return self.copies[value]


def apply(
    prof: Profile, choice: Choice, step: int, next_id: int, origins: dict | None = None
) -> tuple[Graph, list, list]:
    """The graph with ``choice`` made: copies before the late readers, which read them; the
    original producers nothing reads any more dropped. Returns (graph, copies, dropped);
    ``origins`` (when given) gets each copy's outputs -> the values they compute again."""
    copier = _Copier(prof, choice, next_id)
    for first, alias in choice.late:
        copier.value_at(alias, first)
    subst = {a: copier.copies[a] for _, a in choice.late}
    graph, nodes = prof.graph, []
    for i, node in enumerate(graph.nodes):
        nodes.extend(copier.inserts.get(i, ()))
        nodes.append(rewire(node, subst) if i > step else node)
    dropped = _dead_originals(graph, nodes, prof.aliases[choice.owner])
    result = graph.replace(nodes=tuple(n for n in nodes if id(n) not in dropped))
    if origins is not None:
        origins.update(copier.origins)
    return result, copier.made, [n for n in nodes if id(n) in dropped]


def source(value: Value, origins: dict[Value, Value]) -> Value:
    """The value ``value`` computes again (through copies of copies), itself if not a copy."""
    while value in origins:
        value = origins[value]
    return value


def merge(graph: Graph, value: Value, origins: dict[Value, Value]) -> Graph | None:
    """``graph`` without the copy making ``value``: its readers read the latest earlier node
    computing the same values (the original or another copy), and copies only it read go too;
    None when no such node is left.

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder, recomputing
        >>> b = GraphBuilder("f"); x = b.input((4,), "float32"); (y,) = b.node("exp", [x])
        >>> with recomputing():
        ...     (z,) = b.node("exp", [x])
        >>> b.output(*b.node("add", [y, z])); g = b.build()
        >>> [n.op for n in merge(g, z, {z: y}).nodes]
        ['exp', 'add']
    """
    root = source(value, origins)
    position = {v: i for i, n in enumerate(graph.nodes) for v in n.outputs}
    if value not in position:
        return None
    copy = graph.nodes[position[value]]
    twins = [
        n
        for n in graph.nodes[: position[value]]
        if n.outputs and source(n.outputs[0], origins) == root and n.op == copy.op
    ]
    if not twins:
        return None
    subst = dict(zip(copy.outputs, twins[-1].outputs))
    nodes = [rewire(n, subst) for n in graph.nodes if n is not copy]
    reads = Counter(v for n in nodes for v in n.value_inputs)
    reads.update(subst.get(v, v) for v in graph.outputs)
    reads.update(subst.get(new, new) for _, new in graph.updates)
    kept = []
    for node in reversed(nodes):  # a copy feeding only dropped copies is dead too
        if node.recompute and recomputable(node) and not any(reads[v] for v in node.outputs):
            reads.subtract(node.value_inputs)
            continue
        kept.append(node)
    return rebuild(graph, kept[::-1], graph.consts, subst)


def _dead_originals(graph: Graph, nodes: list[Node], values: list[Value]) -> set[int]:
    """ids of the producers of ``values`` (an owner and its views, in schedule order) that
    nothing reads now: their copies took every use, so the forward need not compute them."""
    reads = Counter(v for n in nodes for v in n.value_inputs)
    reads.update(graph.outputs)
    reads.update(new for _, new in graph.updates)
    producers = {v: n for n in nodes for v in n.outputs}  # as rewired (its reads count)
    dead: set[int] = set()
    for value in reversed(values):  # views before their owner: a dead view frees its input
        node = producers.get(value)
        if node is None or id(node) in dead or not recomputable(node):
            continue
        if not any(reads[v] for v in node.outputs):
            dead.add(id(node))
            reads.subtract(node.value_inputs)
    return dead
