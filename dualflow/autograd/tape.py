"""The tape node: what one eager op call records for backward, and nothing more.

A node holds the op, its attrs, one edge per input (``None``, ``(creator_node, index)`` or a
leaf Tensor), the values its op declared in ``saves`` and the input shapes. It never holds input
arrays that backward does not read, and ``release()`` drops everything once backward used it.
The node is also the ``ctx`` that an op's backward receives.
"""

from __future__ import annotations

import itertools
from typing import Any

from dualflow.ops.registry import OpDef

_sequence = itertools.count()


class GraphReleasedError(RuntimeError):
    """Backward reached a node whose saved values were already freed by an earlier backward."""


class Node:
    """One recorded op call (the ``ctx`` of its backward)."""

    __slots__ = (
        "attrs",
        "edges",
        "in_dtypes",
        "in_shapes",
        "loc",
        "needs_input_grad",
        "op",
        "out_metas",
        "saved_inputs",
        "saved_outputs",
        "seq",
    )

    def __init__(
        self,
        op: OpDef,
        attrs: dict[str, Any],
        edges: tuple,
        saved_inputs: tuple,
        saved_outputs: tuple,
        in_shapes: tuple,
        in_dtypes: tuple,
        out_metas: tuple,
        loc: Any = None,
    ) -> None:
        self.op = op
        self.attrs = attrs
        self.edges = edges
        self.saved_inputs = saved_inputs
        self.saved_outputs = saved_outputs
        self.in_shapes = in_shapes
        self.in_dtypes = in_dtypes
        self.out_metas = out_metas
        self.seq = next(_sequence)
        self.loc = loc
        self.needs_input_grad: tuple[bool, ...] = ()

    def release(self) -> None:
        """Free the saved values (Chainer's memory-efficient backprop)."""
        self.saved_inputs = self.saved_outputs = None
        self.edges = None

    @property
    def released(self) -> bool:
        """Whether an earlier backward already freed this node."""
        return self.edges is None

    def input(self, index: int) -> Any:
        """Saved input ``index``: the input Tensor itself (so double backward reaches its graph),
        a Python scalar as given (keeping numpy's weak-scalar dtype rule), or a wrapped array."""
        from dualflow.tensor import as_tensor  # noqa: PLC0415 - tensor imports autograd

        value = self.saved_inputs[self.op.save_inputs.index(index)]
        return value if isinstance(value, int | float) else as_tensor(value)

    def output(self, index: int = 0) -> Any:
        """Saved output ``index`` as a Tensor whose creator is this node."""
        from dualflow.tensor import Tensor  # noqa: PLC0415

        position = self.op.save_outputs.index(index)
        return Tensor._wrap(self.saved_outputs[position], self, index, True)

    def __getattr__(self, name: str) -> Any:
        # ctx.x0 / ctx.x1 / ctx.y / ctx.y1: the declared saves, reconstructed on access.
        if name[:1] == "x" and name[1:].isdigit():
            return self.input(int(name[1:]))
        if name == "y":
            return self.output(0)
        if name[:1] == "y" and name[1:].isdigit():
            return self.output(int(name[1:]))
        raise AttributeError(name)

    def __repr__(self) -> str:
        return f"<node {self.op.name} #{self.seq}>"
