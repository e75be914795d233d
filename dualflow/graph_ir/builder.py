"""``GraphBuilder``: append values and nodes one at a time, then freeze them into a ``Graph``.

Output shapes/dtypes of a node come from its op's ``infer`` unless the caller already knows them
(the concrete tracer does: it has just computed the arrays).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np

from dualflow._thread_local import ThreadDefaults
from dualflow.device import CPU, send
from dualflow.graph_ir.ir import Graph, Literal, Node, Value
from dualflow.ops.registry import OPS, Meta
from dualflow.ops.synthetic import GUARD

_SCOPE = ThreadDefaults(on=False)  # .on: nodes built now recompute forward values (recomputing())


@contextlib.contextmanager
def recomputing() -> Iterator[None]:
    """Mark every node any builder of this thread makes inside as a recompute node
    (``Node.recompute``): a checkpointed segment's re-run in backward, which CSE must not merge
    back into the forward's values.

    Example:
        >>> b = GraphBuilder("f"); x = b.input((2,), "float32")
        >>> with recomputing():
        ...     _ = b.node("exp", [x])
        >>> _ = b.node("exp", [x]); [n.recompute for n in b.nodes]
        [True, False]
    """
    before = _SCOPE.on
    _SCOPE.on = True
    try:
        yield
    finally:
        _SCOPE.on = before


def _meta(value: Value | Literal) -> Meta:
    if isinstance(value, Value):
        return Meta(value.shape, np.dtype(value.dtype))
    return Meta((), type(value))


class GraphBuilder:
    """Builds one Graph; value ids are unique within it.

    Example:
        >>> b = GraphBuilder("double")
        >>> x = b.input((3,), "float32", "x")
        >>> (y,) = b.node("multiply", [x, 2.0])
        >>> b.output(y); len(b.build().nodes)
        1
    """

    def __init__(self, name: str, first_id: int = 0) -> None:
        self.name = name
        self._ids = itertools.count(first_id)
        self.last_id = first_id - 1  # id of the newest value
        self.inputs: list[Value] = []
        self.state: list[Value] = []
        self.consts: dict[Value, np.ndarray] = {}
        self.nodes: list[Node] = []
        self.outputs: list[Value] = []
        self.updates: dict[Value, Value] = {}

    def value(self, shape: tuple[int, ...], dtype: Any, name: str | None = None) -> Value:
        """A fresh Value (not yet defined by anything)."""
        self.last_id = next(self._ids)
        return Value(self.last_id, tuple(int(d) for d in shape), np.dtype(dtype).name, name)

    def input(self, shape: tuple[int, ...], dtype: Any, name: str | None = None) -> Value:
        """Add a graph input (an argument of the traced function)."""
        v = self.value(shape, dtype, name)
        self.inputs.append(v)
        return v

    def add_state(self, shape: tuple[int, ...], dtype: Any, name: str | None = None) -> Value:
        """Add captured state (parameters, buffers, optimizer and RNG state), read by reference."""
        v = self.value(shape, dtype, name)
        self.state.append(v)
        return v

    def const(self, array: Any, name: str | None = None) -> Value:
        """Add a constant array (baked into the graph and saved with it).

        Constants are kept on the host whatever device made them: graphs are device-neutral
        (passes fold on numpy, files store numpy); a plan sends them to its device once.
        """
        array = np.asarray(send(array, CPU))
        v = self.value(array.shape, array.dtype, name)
        self.consts[v] = array
        return v

    def node(
        self,
        op: str,
        inputs: list[Value | Literal],
        attrs: dict[str, Any] | None = None,
        loc: str | None = None,
        out_metas: list[Meta] | None = None,
    ) -> tuple[Value, ...]:
        """Append ``op(inputs, **attrs)``; returns its output Values."""
        attrs = dict(attrs or {})
        if out_metas is None:
            out_metas = list(OPS[op].infer(*(_meta(v) for v in inputs), **attrs))
        outputs = tuple(self.value(m.shape, m.dtype) for m in out_metas)
        recompute = _SCOPE.on
        self.nodes.append(Node(op, tuple(inputs), outputs, attrs, loc, recompute))
        return outputs

    def guard(self, value: Value, expect: Any, kind: str, loc: str | None = None) -> None:
        """Append a guard asserting that ``kind(value) == expect`` at run time."""
        self.nodes.append(Node(GUARD.name, (value,), (), {"expect": expect, "kind": kind}, loc))

    def output(self, *values: Value) -> None:
        """Declare graph outputs, in order."""
        self.outputs.extend(values)

    def update(self, state: Value, new: Value) -> None:
        """Record that ``state`` takes the content of ``new`` when the call commits."""
        if state not in self.state:
            raise ValueError(f"update: {state!r} is not a state value of graph {self.name}")
        self.updates[state] = new

    def build(self) -> Graph:
        """Freeze into an immutable Graph."""
        return Graph(
            self.name,
            tuple(self.inputs),
            tuple(self.state),
            dict(self.consts),
            tuple(self.nodes),
            tuple(self.outputs),
            tuple(self.updates.items()),
        )
