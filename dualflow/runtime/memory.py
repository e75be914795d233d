"""Memory planning over a graph's schedule (DESIGN §5): liveness, in-place and best-fit reuse.

Steps whose kernel can write into ``out=`` get a slice of a preallocated buffer; everything else
allocates as before. ``predicted_peak`` covers every intermediate and output the plan allocates
(pooled buffers plus the peak of the unplanned ones alive at once), never inputs, state, consts.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.graph_ir.layout import surely_strided
from dualflow.ops.registry import OPS
from dualflow.runtime.aliasing import alias_roots
from dualflow.runtime.out_forward import inplace_inputs, writes_out
from dualflow.runtime.recycle import run_outputs


@dataclass(frozen=True)
class MemoryRow:
    """One planned value: the buffer it lives in and the steps it holds it (inclusive)."""

    value: int
    buffer: int
    nbytes: int
    first: int
    last: int
    shared_with: tuple[int, ...]
    # "new", "reuse" (a freed buffer), "inplace" (a dying input's buffer), "output" (the
    # output's own per-run buffer) or "lent" (an earlier value in an output's per-run buffer)
    how: str


@dataclass(frozen=True)
class MemoryPlan:
    """The inspectable result: rows, buffer sizes, and the predicted peak in bytes."""

    rows: tuple[MemoryRow, ...]
    buffer_sizes: tuple[int, ...]
    planned: tuple[Value, ...]
    dynamic_peak: int
    fresh: tuple[Value, ...] = ()  # outputs with a per-run buffer, one per buffer index below
    fresh_buffers: tuple[int, ...] = ()

    @property
    def buffer_bytes(self) -> int:
        """Bytes of the pooled buffers allocated once per plan and kept across runs."""
        return sum(s for b, s in enumerate(self.buffer_sizes) if b not in self.fresh_buffers)

    @property
    def fresh_bytes(self) -> int:
        """Bytes of the outputs' own buffers, allocated at every run and returned to the caller."""
        return sum(self.buffer_sizes[b] for b in self.fresh_buffers)

    @property
    def predicted_peak(self) -> int:
        """Pooled and per-run buffers plus the most bytes of unplanned values alive at once."""
        return self.buffer_bytes + self.fresh_bytes + self.dynamic_peak

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
        raw = [
            None if b in self.fresh_buffers else xp.empty(size, dtype=np.uint8)
            for b, size in enumerate(self.buffer_sizes)
        ]
        return self._views(dict(enumerate(raw)), {})

    def per_run(self, xp: Any, pooled: list[Any], spare: list[Any] | None = None) -> list[Any]:
        """``pooled`` (from ``allocate``) with the outputs' per-run buffers filled in: each
        output is an array of its own shape, and what was lent of it views its bytes.

        ``spare`` holds the outputs of the last ``RECYCLED_RUNS`` runs: one nobody else
        references any more (the caller dropped it and every view of it) is written again instead
        of a new array, whose fresh pages the kernel would first have to fault in and zero
        (~0.4 ms for 16 MB). The list is refilled with this run's outputs and the last run's
        untaken ones.

        Example:
            >>> from dualflow.graph_ir.builder import GraphBuilder
            >>> b = GraphBuilder("f"); x = b.input((128, 128), "float32")
            >>> (y,) = b.node("exp", [x]); b.output(*b.node("tanh", [y]))
            >>> memory = plan_memory(b.build())
            >>> [a.base is None for a in memory.per_run(np, memory.allocate(np))]
            [False, True]
        """
        if not self.fresh:
            return pooled
        arrays = dict(zip(self.fresh_buffers, run_outputs(xp, self.fresh, spare)))
        # the output itself is the new array, no view (and what was lent of it in its shape)
        views = {key: arrays[key[0]] for key in self._output_keys}
        bufs = list(pooled)
        host = xp is np  # numpy: a view made by one constructor call over the output's bytes
        for i, key, shape, dtype in self._lent:  # a hot path: per call, the outputs' rows only
            array = views.get(key)
            if array is None:
                output = arrays[key[0]]
                array = views[key] = (
                    np.ndarray(shape, dtype, buffer=output)
                    if host
                    else _view(output.reshape(-1).view(np.uint8), self.planned[i])
                )
            bufs[i] = array
        return bufs

    @cached_property
    def _keys(self) -> tuple[tuple, ...]:
        """Per planned value: (its buffer, shape, dtype); values of one key share one array
        object, so a step writing over its dying input (an "inplace" row) gets ``out is
        input`` and kernels read that input through ``out`` (two pointers to one array kept
        LLVM from vectorizing: 3-8x slower loops)."""
        return tuple(_key(row.buffer, value) for row, value in zip(self.rows, self.planned))

    @cached_property
    def _output_keys(self) -> tuple[tuple, ...]:
        return tuple(_key(b, value) for b, value in zip(self.fresh_buffers, self.fresh))

    @cached_property
    def _lent(self) -> tuple[tuple[int, tuple, tuple[int, ...], np.dtype], ...]:
        """(row, key, shape, dtype) of each value in an output's per-run buffer: read once."""
        fresh = set(self.fresh_buffers)
        return tuple(
            (i, self._keys[i], tuple(value.shape), np.dtype(value.dtype))
            for i, (row, value) in enumerate(zip(self.rows, self.planned))
            if row.buffer in fresh
        )

    def _views(self, raw: dict[int, Any], views: dict[tuple, Any]) -> list[Any]:
        """One array per planned value over its buffer's ``raw`` bytes (None where a buffer has
        none), one object per ``_keys`` key (``views`` seeded with any given)."""
        arrays = []
        for key, value in zip(self._keys, self.planned):
            if key not in views and raw.get(key[0]) is not None:
                views[key] = _view(raw[key[0]], value)
            arrays.append(views.get(key))
        return arrays

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
        per_run = f" + {self.fresh_bytes} B of outputs" if self.fresh else ""
        lines.append(
            f"predicted peak {self.predicted_peak} B = {self.buffer_bytes} B in "
            f"{len(self.buffer_sizes) - len(self.fresh)} buffers{per_run} + "
            f"{self.dynamic_peak} B unplanned"
        )
        return "\n".join(lines)


def _key(buffer: int, value: Value) -> tuple:
    return buffer, tuple(value.shape), np.dtype(value.dtype).str


def _view(raw: Any, value: Value) -> Any:
    return raw[: value.nbytes].view(value.dtype).reshape(value.shape)


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


def _best_fit(
    free: list[int], sizes: list[int], need: int, release: int, until: dict[int, int]
) -> tuple[int, str]:
    """A free buffer for a value alive until step ``release``: an output's per-run buffer when
    one fits and the value dies before that output is written (it costs nothing more), else
    the smallest pooled one that fits (or the largest grown, or a new one)."""
    lent = [b for b in free if b in until and sizes[b] >= need and release < until[b]]
    if lent:
        buffer = min(lent, key=lambda b: sizes[b])
        free.remove(buffer)
        return buffer, "lent"
    pooled = [b for b in free if b not in until]
    fitting = [b for b in pooled if sizes[b] >= need]
    if fitting:
        buffer = min(fitting, key=lambda b: sizes[b])
    elif pooled:  # growing the largest free buffer costs less than a new one
        buffer = max(pooled, key=lambda b: sizes[b])
        sizes[buffer] = need
    else:
        sizes.append(need)
        return len(sizes) - 1, "new"
    free.remove(buffer)
    return buffer, "reuse"


def _place(
    node: Node, out: Value, step: int, state: tuple, fresh: dict[Value, int], ctx: tuple
) -> tuple[int, str]:
    """The buffer of one planned value and how it got it (``_assign``'s per-step choice)."""
    buffer_of, sizes, free, freed_after, until = state
    planned, roots, release = ctx
    if out in fresh:  # free again: whatever was lent of it died before this step
        free.remove(fresh[out])
        return fresh[out], "output"
    source = _inplace_source(node, out, step, planned, roots, release)
    taken = None if source is None else buffer_of[source]
    if taken is not None and (taken not in until or release[out] < until[taken]):
        freed_after[step].remove(taken)
        return taken, "inplace"
    return _best_fit(free, sizes, max(out.nbytes, 1), release[out], until)


def _assign(
    graph: Graph, planned: set, roots: dict, release: dict, fresh: dict[Value, int]
) -> tuple[dict[Value, int], dict[Value, str], list[int]]:
    """Walk the schedule giving each planned value a buffer: in place, best fit, or new.
    ``fresh`` maps each output with a per-run buffer to that buffer's index (they come first)."""
    buffer_of: dict[Value, int] = {}
    how: dict[Value, str] = {}
    sizes = [v.nbytes for v in fresh]
    free = list(fresh.values())  # lent out until their output's step
    defined = {v: i for i, n in enumerate(graph.nodes) for v in n.outputs}
    until = {b: defined[v] for v, b in fresh.items()}
    freed_after: dict[int, list[int]] = {}
    state, ctx = (buffer_of, sizes, free, freed_after, until), (planned, roots, release)
    for step, node in enumerate(graph.nodes):
        out = node.outputs[0] if node.outputs and node.outputs[0] in planned else None
        if out is not None:
            buffer_of[out], how[out] = _place(node, out, step, state, fresh, ctx)
            freed_after.setdefault(release[out], []).append(buffer_of[out])
        free.extend(freed_after.pop(step, []))
    return buffer_of, how, sizes


def _scratch(node: Node) -> int:
    """Bytes the step's CPU kernel allocates and frees within the step (its op's fact; a
    Python-scalar operand's meta is None)."""
    op = OPS.get(node.op)
    if op is None or op.scratch is None:
        return 0
    return int(op.scratch(node.input_metas, node.attrs))


def _dynamic_peak(
    graph: Graph, planned: set, roots: dict, release: dict, no_alloc: frozenset, cpu: bool
) -> int:
    """Most bytes of unplanned, memory-owning node outputs alive at any one step, plus the
    kernels' scratch on the CPU; ``no_alloc``: values written straight into state (donated)."""
    live = np.zeros(len(graph.nodes) + 2, dtype=np.int64)
    for step, node in enumerate(graph.nodes):
        for v in node.outputs:
            if v not in planned and v not in no_alloc and v in roots[v]:
                live[step] += v.nbytes
                live[release[v] + 1] -= v.nbytes
        scratch = _scratch(node) if cpu else 0
        live[step] += scratch
        live[step + 1] -= scratch
    return int(np.cumsum(live).max(initial=0))


FRESH_MIN_BYTES = 64 * 1024  # below this, a per-run buffer and its views cost more than they save


def _fresh_outputs(graph: Graph, roots: dict, out_roots: set, update_roots: set) -> list[Value]:
    """Outputs written by an ``out=`` step into memory of their own (not a view, not state):
    each gets a per-run buffer, lent to earlier values before it is written."""
    found = []
    for node in graph.nodes:
        out = node.outputs[0] if node.outputs else None
        if (
            out in out_roots
            and out not in update_roots
            and roots[out] == frozenset({out})
            and out.nbytes >= FRESH_MIN_BYTES
            and writes_out(node)
        ):
            found.append(out)
    return found


def plan_memory(
    graph: Graph, donated: frozenset = frozenset(), device_kind: str = "cpu"
) -> MemoryPlan:
    """Plan buffers for every step that can write ``out=``: intermediates in pooled buffers kept
    across runs, large outputs in per-run buffers of their own; updates are never planned.
    ``donated`` values are written into state (no allocation); on the CPU the predicted peak
    counts the kernels' scratch.

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((256,), "float32")
        >>> (y,) = b.node("exp", [x]); (z,) = b.node("tanh", [y]); (w,) = b.node("negative", [z])
        >>> b.output(*b.node("sum", [w], {"axis": None, "keepdims": False}))
        >>> plan = plan_memory(b.build()); [r.how for r in plan.rows], plan.buffer_sizes
        (['new', 'inplace', 'inplace'], (1024,))
    """
    roots = alias_roots(graph)
    out_roots = set().union(*(roots.get(v, ()) for v in graph.outputs))
    update_roots = set().union(*(roots.get(new, ()) for _, new in graph.updates))
    # a checked elementwise step reading a surely non-C operand always allocates as eager does
    # (its result keeps that layout): a buffer for it would sit unused, and the peak be wrong
    strided = surely_strided(graph)
    never = {
        n.outputs[0]
        for n in graph.nodes
        if getattr(OPS.get(n.op), "layout", None) == "elementwise"
        and any(v in strided for v in n.value_inputs)
    }
    found = _fresh_outputs(graph, roots, out_roots, update_roots)
    fresh = {v: b for b, v in enumerate(v for v in found if v not in never)}
    escaping = out_roots | update_roots | never
    planned = {n.outputs[0] for n in graph.nodes if writes_out(n) and n.outputs[0] not in escaping}
    planned |= set(fresh)
    release = _release(graph, roots)
    buffer_of, how, sizes = _assign(graph, planned, roots, release, fresh)
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
    dynamic = _dynamic_peak(graph, planned, roots, release, donated, device_kind == "cpu")
    return MemoryPlan(rows, tuple(sizes), order, dynamic, tuple(fresh), tuple(fresh.values()))
