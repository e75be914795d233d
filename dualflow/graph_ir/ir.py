"""The graph IR's data types: immutable SSA ``Value``, ``Node`` and ``Graph`` (DESIGN §4).

A node's ``op`` is a registry name (the synthetic ``fused``/``guard`` included); its inputs are
Values or Python scalar literals; ``attrs`` are plain data. State writes are ``updates`` (state
value -> new value), committed by the runtime only after every guard passed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from dualflow.ops.registry import OPS

Literal = int | float | bool


@dataclass(frozen=True, eq=False)
class Value:
    """One SSA value: defined exactly once (graph input, state, constant or node output).

    Example:
        >>> Value(0, (2, 3), "float32", "x")
        %0: float32[2,3] "x"
    """

    id: int
    shape: tuple[int, ...]
    dtype: str
    name: str | None = None

    @property
    def nbytes(self) -> int:
        """Bytes of the array this value holds (``prod(shape) * itemsize``)."""
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize  # math.prod: 20x np.prod

    def __repr__(self) -> str:
        shape = ",".join(str(d) for d in self.shape)
        quoted = self.name.replace("\\", "\\\\").replace('"', '\\"') if self.name else ""
        named = f' "{quoted}"' if self.name else ""
        return f"%{self.id}: {self.dtype}[{shape}]{named}"


@dataclass(frozen=True, eq=False)
class Node:
    """One op application; ``loc`` is the user's source line (``file.py:41``) or None.

    ``recompute`` marks a node that computes again, for the backward, a value the forward
    already computed (a rematerialization or a checkpointed segment's re-run): passes that
    merge identical nodes (CSE) must leave it apart, or the forward value would be kept alive
    until the backward and the recomputation would save nothing.

    Example:
        >>> x = Value(0, (2,), "float32")
        >>> Node("exp", (x,), (Value(1, (2,), "float32"),)).op
        'exp'
    """

    op: str
    inputs: tuple[Value | Literal, ...]
    outputs: tuple[Value, ...]
    attrs: dict[str, Any] = field(default_factory=dict)
    loc: str | None = None
    recompute: bool = False

    @property
    def value_inputs(self) -> tuple[Value, ...]:
        """The inputs that are Values (literals dropped)."""
        return tuple(v for v in self.inputs if isinstance(v, Value))

    @property
    def input_metas(self) -> tuple[tuple[tuple[int, ...], Any] | None, ...]:
        """(shape, dtype) per input, None for a literal: what op facts such as ``scratch`` and
        ``flops`` take."""
        return tuple((v.shape, v.dtype) if isinstance(v, Value) else None for v in self.inputs)


@dataclass(frozen=True, eq=False)
class Graph:
    """A whole traced function: inputs, captured state, constants, nodes, outputs, updates.

    ``consts`` maps constant Values to their arrays; ``updates`` pairs a state Value with the
    Value holding its new content; guard nodes (op ``guard``) are ordinary nodes, listed by
    ``guards``.
    """

    name: str
    inputs: tuple[Value, ...]
    state: tuple[Value, ...]
    consts: dict[Value, np.ndarray]
    nodes: tuple[Node, ...]
    outputs: tuple[Value, ...]
    updates: tuple[tuple[Value, Value], ...] = ()

    @property
    def guards(self) -> tuple[Node, ...]:
        """The guard nodes, in order."""
        return tuple(n for n in self.nodes if OPS[n.op].guard)

    @cached_property
    def producers(self) -> dict[Value, Node]:
        """Value -> the node that defines it (graph inputs/state/consts have none)."""
        return {v: n for n in self.nodes for v in n.outputs}

    @cached_property
    def users(self) -> dict[Value, tuple[Node, ...]]:
        """Value -> the nodes that read it, in schedule order."""
        table: dict[Value, list[Node]] = {}
        for node in self.nodes:
            for v in node.value_inputs:
                table.setdefault(v, []).append(node)
        return {v: tuple(ns) for v, ns in table.items()}

    @cached_property
    def last_use(self) -> dict[Value, int]:
        """Value -> index of the last node reading it (outputs/updates count as the end)."""
        table = {v: i for i, n in enumerate(self.nodes) for v in n.value_inputs}
        end = len(self.nodes)
        for v in self.outputs:
            table[v] = end
        for _, new in self.updates:
            table[new] = end
        return table

    def replace(self, **changes: Any) -> Graph:
        """A copy with some fields changed (the IR is immutable; passes build new graphs)."""
        fields = {
            k: getattr(self, k)
            for k in ("name", "inputs", "state", "consts", "nodes", "outputs", "updates")
        }
        fields.update(changes)
        return Graph(**fields)

    def __len__(self) -> int:
        return len(self.nodes)

    def __str__(self) -> str:
        from dualflow.graph_ir.printer import print_graph  # noqa: PLC0415 - printer imports ir

        return print_graph(self)
