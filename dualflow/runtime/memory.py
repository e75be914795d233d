"""Memory planning over a graph's schedule (DESIGN §5): liveness, in-place and best-fit reuse.

Steps whose kernel can write into ``out=`` get a slice of a preallocated buffer; everything else
allocates as before. ``predicted_peak`` covers every intermediate and output the plan allocates
(pooled buffers plus the peak of the unplanned ones alive at once), never inputs, state, consts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.ops.registry import OPS
from dualflow.runtime.out_forward import inplace_inputs, writes_out


@dataclass(frozen=True)
class MemoryRow:
    """One planned value: the buffer it lives in and the steps it holds it (inclusive)."""

    value: int
    buffer: int
    nbytes: int
    first: int
    last: int
    shared_with: tuple[int, ...]
    how: str  # "new", "reuse" (a freed buffer) or "inplace" (a dying input's buffer)


@dataclass(frozen=True)
class MemoryPlan:
    """The inspectable result: rows, buffer sizes, and the predicted peak in bytes."""

    rows: tuple[MemoryRow, ...]
    buffer_sizes: tuple[int, ...]
    planned: tuple[Value, ...]
    dynamic_peak: int

    @property
    def buffer_bytes(self) -> int:
        """Bytes of all pooled buffers (allocated once per plan, kept across runs)."""
        return sum(self.buffer_sizes)

    @property
    def predicted_peak(self) -> int:
        """Pooled buffers plus the most bytes of unplanned intermediates/outputs alive at once."""
        return self.buffer_bytes + self.dynamic_peak

    def allocate(self, xp: Any) -> list[Any]:
        """One ``out=`` array per planned value (views into raw byte buffers), in plan order.

        Example:
            >>> from dualflow.graph_ir.builder import GraphBuilder
            >>> b = GraphBuilder("f"); x = b.input((4,), "float32")
            >>> (y,) = b.node("exp", [x])
            >>> b.output(*b.node("sum", [y], {"axis": None, "keepdims": False}))
            >>> [a.shape for a in plan_memory(b.build()).allocate(np)]
            [(4,)]
        """
        raw = [xp.empty(size, dtype=np.uint8) for size in self.buffer_sizes]
        return [
            raw[row.buffer][: value.nbytes].view(value.dtype).reshape(value.shape)
            for row, value in zip(self.rows, self.planned)
        ]

    def table(self) -> str:
        """The plan as aligned text: one line per planned value, then totals.

        Example:
            >>> from dualflow.graph_ir.builder import GraphBuilder
            >>> b = GraphBuilder("f"); b.output(b.input((2,), "float32"))
            >>> plan_memory(b.build()).table().splitlines()[-1]
            'predicted peak 0 B = 0 B in 0 buffers + 0 B unplanned'
        """
        lines = [
            f"{'value':>6} {'buffer':>6} {'bytes':>10} {'first':>5} {'last':>5}  how     shared"
        ]
        for r in self.rows:
            shared = ", ".join(f"%{v}" for v in r.shared_with) or "-"
            lines.append(
                f"{'%' + str(r.value):>6} {r.buffer:>6} {r.nbytes:>10} {r.first:>5} {r.last:>5}"
                f"  {r.how:<7} {shared}"
            )
        lines.append(
            f"predicted peak {self.predicted_peak} B = {self.buffer_bytes} B in "
            f"{len(self.buffer_sizes)} buffers + {self.dynamic_peak} B unplanned"
        )
        return "\n".join(lines)


def _kind(node: Node) -> str:
    """The op's ``aliasing`` fact: "fresh" (new memory), "view" (of an input) or "unknown"."""
    op = OPS.get(node.op)
    return "unknown" if op is None else op.aliasing


def alias_roots(graph: Graph, with_state: bool = False) -> dict[Value, frozenset[Value]]:
    """Node output -> the node outputs owning memory it may share (itself if it owns some).

    Ops of unknown ``aliasing`` are assumed to both allocate and alias their inputs (safe side).
    ``with_state`` also counts each state value as the owner of its own memory (donation asks
    which values may be views of a state array).

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2, 3), "float32")
        >>> (y,) = b.node("exp", [x]); (t,) = b.node("transpose", [y], {"axes": (1, 0)})
        >>> alias_roots(b.build())[t] == {y}
        True
    """
    roots: dict[Value, frozenset[Value]] = (
        {s: frozenset({s}) for s in graph.state} if with_state else {}
    )
    for node in graph.nodes:
        kind = _kind(node)
        inherited = frozenset().union(*(roots.get(v, frozenset()) for v in node.value_inputs))
        for out in node.outputs:
            if kind == "fresh":
                roots[out] = frozenset({out})
            else:
                roots[out] = inherited if kind == "view" else inherited | {out}
    return roots


def _release(graph: Graph, roots: dict[Value, frozenset[Value]]) -> dict[Value, int]:
    """Owner -> last step any value aliasing it is read (the schedule's end for outputs)."""
    defined = {v: i for i, n in enumerate(graph.nodes) for v in n.outputs}
    release = dict(defined)
    for value, owners in roots.items():
        end = graph.last_use.get(value, defined[value])
        for owner in owners:
            release[owner] = max(release[owner], end)
    return release


def _inplace_source(
    node: Node, out: Value, step: int, planned: set, roots: dict, release: dict
) -> Value | None:
    """A planned input of the step dying here whose buffer ``out`` can take over (one of the
    inputs its op may write over: never BLAS's operands, say)."""
    for v in inplace_inputs(node):
        if v in planned and release[v] == step and (v.shape, v.dtype) == (out.shape, out.dtype):
            others = [w for w in node.value_inputs if w is not v and v in roots.get(w, ())]
            if not others:  # a view of v read by the same step would see half-written data
                return v
    return None


def _best_fit(free: list[int], sizes: list[int], need: int) -> tuple[int, str]:
    fitting = [b for b in free if sizes[b] >= need]
    if fitting:
        buffer = min(fitting, key=lambda b: sizes[b])
    elif free:  # growing the largest free buffer costs less than a new one
        buffer = max(free, key=lambda b: sizes[b])
        sizes[buffer] = need
    else:
        sizes.append(need)
        return len(sizes) - 1, "new"
    free.remove(buffer)
    return buffer, "reuse"


def _assign(
    graph: Graph, planned: set, roots: dict, release: dict
) -> tuple[dict[Value, int], dict[Value, str], list[int]]:
    """Walk the schedule giving each planned value a buffer: in place, best fit, or new."""
    buffer_of: dict[Value, int] = {}
    how: dict[Value, str] = {}
    sizes: list[int] = []
    free: list[int] = []
    freed_after: dict[int, list[int]] = {}
    for step, node in enumerate(graph.nodes):
        out = node.outputs[0] if node.outputs and node.outputs[0] in planned else None
        if out is not None:
            source = _inplace_source(node, out, step, planned, roots, release)
            if source is not None:
                buffer_of[out], how[out] = buffer_of[source], "inplace"
                freed_after[step].remove(buffer_of[source])
            else:
                buffer_of[out], how[out] = _best_fit(free, sizes, max(out.nbytes, 1))
            freed_after.setdefault(release[out], []).append(buffer_of[out])
        free.extend(freed_after.pop(step, []))
    return buffer_of, how, sizes


def _dynamic_peak(graph: Graph, planned: set, roots: dict, release: dict) -> int:
    """Most bytes of unplanned, memory-owning node outputs alive at any one step."""
    live = np.zeros(len(graph.nodes) + 2, dtype=np.int64)
    for step, node in enumerate(graph.nodes):
        for v in node.outputs:
            if v not in planned and v in roots[v]:
                live[step] += v.nbytes
                live[release[v] + 1] -= v.nbytes
    return int(np.cumsum(live).max(initial=0))


def plan_memory(graph: Graph) -> MemoryPlan:
    """Plan buffers for every step that can write ``out=``; outputs and updates are never planned.

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((256,), "float32")
        >>> (y,) = b.node("exp", [x]); (z,) = b.node("tanh", [y]); (w,) = b.node("negative", [z])
        >>> b.output(*b.node("sum", [w], {"axis": None, "keepdims": False}))
        >>> plan = plan_memory(b.build()); [r.how for r in plan.rows], plan.buffer_sizes
        (['new', 'inplace', 'inplace'], (1024,))
    """
    roots = alias_roots(graph)
    escaping = set().union(*(roots.get(v, ()) for v in graph.outputs))
    escaping |= set().union(*(roots.get(new, ()) for _, new in graph.updates))
    planned = {n.outputs[0] for n in graph.nodes if writes_out(n) and n.outputs[0] not in escaping}
    release = _release(graph, roots)
    buffer_of, how, sizes = _assign(graph, planned, roots, release)
    order = tuple(v for n in graph.nodes for v in n.outputs if v in planned)
    defined = {v: i for i, n in enumerate(graph.nodes) for v in n.outputs}
    sharing: dict[int, list[Value]] = {}  # buffer -> its values (a scan per row was quadratic)
    for v in order:
        sharing.setdefault(buffer_of[v], []).append(v)
    rows = tuple(
        MemoryRow(
            v.id,
            buffer_of[v],
            v.nbytes,
            defined[v],
            release[v],
            tuple(w.id for w in sharing[buffer_of[v]] if w is not v),
            how[v],
        )
        for v in order
    )
    return MemoryPlan(rows, tuple(sizes), order, _dynamic_peak(graph, planned, roots, release))
