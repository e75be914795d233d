"""The tape node: what one eager op call records for backward, and nothing more.

A node holds the op, its attrs, one edge per input (``None``, ``(creator_node, index)`` or a
leaf Tensor), the values its op declared in ``saves`` and the input shapes. It never holds input
arrays that backward does not read, and ``release()`` drops everything once backward used it.
The node is also the ``ctx`` that an op's backward receives. ``record`` is the one place nodes
are built (eager ops, ``to_device``, module backward hooks, compiled calls' outputs), and ``edge``
the one definition of where an input's gradient goes.
"""

from __future__ import annotations

import itertools
from typing import Any

from dualflow.ops.registry import OpDef
from dualflow.symbolic_shapes import SYMBOLIC

# a cycle (the tensor module imports autograd, which imports this one): read at call time only
from dualflow.tensor import core as _tensor

_sequence = itertools.count()
_new = object.__new__


def next_seq() -> int:
    """A number above every tape node made so far (the tracer tells older nodes apart)."""
    return next(_sequence)


class GraphReleasedError(RuntimeError):
    """Backward reached a node whose saved values were already freed by an earlier backward."""


def _saved_input(index: int) -> Any:
    """``ctx.x<index>``'s getter: ``Node.input`` with the common case (a Tensor or a Python
    number, saved as given) answered in the getter's own frame (~0.15 us a read less)."""

    def get(node: Node) -> Any:
        value = node.saved_inputs[node.op.save_inputs.index(index)]
        if type(value) is _tensor.Tensor or type(value) is float:
            return value
        return node.input(index)

    return get


def _saved_output(index: int) -> Any:
    """``ctx.y<index>``'s getter: ``Node.output`` without its own frame (the Tensor is still
    ``Tensor.wrap``'s, so every slot is set as everywhere else)."""

    def get(node: Node) -> Any:
        position = node.op.save_outputs.index(index)
        return _tensor.Tensor.wrap(node.saved_outputs[position], node, index, True)

    return get


class Node:
    """One recorded op call (the ``ctx`` of its backward); built by ``record`` only."""

    __slots__ = (
        "attrs",
        "edges",
        "in_shapes",
        "loc",
        "needs",
        "op",
        "out_metas",
        "saved_inputs",
        "saved_outputs",
        "seq",
    )
    op: OpDef
    attrs: dict[str, Any]
    edges: tuple | None  # one per input: None, (creator node, output index) or a leaf Tensor
    saved_inputs: tuple | None
    saved_outputs: tuple | None
    in_shapes: tuple
    out_metas: tuple | None
    seq: int  # creation order: backward runs nodes newest first
    loc: Any  # the user's line (debug mode)
    needs: tuple[bool, ...] | None  # set by grad() when it prunes inputs

    def release(self) -> None:
        """Free the saved values (Chainer's memory-efficient backprop); attrs too: a compiled
        call's node keeps its residuals there."""
        self.saved_inputs = self.saved_outputs = None
        self.edges = None
        self.attrs = {}

    @property
    def needs_input_grad(self) -> tuple[bool, ...]:
        """Which inputs backward must return a gradient for (others may be None)."""
        if self.needs is not None:
            return self.needs
        edges = self.edges  # one or two inputs spelled out: this runs in most backwards
        if len(edges) == 2:
            return (edges[0] is not None, edges[1] is not None)
        if len(edges) == 1:
            return (edges[0] is not None,)
        return tuple([e is not None for e in edges])

    @property
    def released(self) -> bool:
        """Whether an earlier backward already freed this node."""
        return self.edges is None

    def input(self, index: int) -> Any:
        """Saved input ``index``: the input Tensor itself (so double backward reaches its graph),
        a Python scalar as given (keeping numpy's weak-scalar dtype rule), or a wrapped array."""
        value = self.saved_inputs[self.op.save_inputs.index(index)]
        if isinstance(value, (_tensor.Tensor, int, float)):  # a tuple, not a union: 0.3 us less
            return value
        if isinstance(value, SYMBOLIC):  # a size's expression (a dynamic-shape trace)
            return value
        return _tensor.as_tensor(value)

    def output(self, index: int = 0) -> Any:
        """Saved output ``index`` as a Tensor whose creator is this node."""
        position = self.op.save_outputs.index(index)
        return _tensor.Tensor.wrap(self.saved_outputs[position], self, index, True)

    # ctx.x0 / ctx.x1 / ctx.y ...: the declared saves, as properties (faster than __getattr__).
    x0 = property(_saved_input(0))
    x1 = property(_saved_input(1))
    x2 = property(_saved_input(2))
    x3 = property(_saved_input(3))
    x4 = property(_saved_input(4))
    y = property(_saved_output(0))
    y0 = property(_saved_output(0))
    y1 = property(_saved_output(1))
    y2 = property(_saved_output(2))

    def __repr__(self) -> str:
        return f"<node {self.op.name} #{self.seq}>"


def edge(value: Any) -> Any:
    """Where backward sends the gradient of op input ``value``: None when it takes none (not a
    Tensor, or not requiring grad), ``(creator node, output index)`` for a computed tensor, and
    the tensor itself for a leaf (whose ``.grad`` accumulates it).

    Example:
        >>> import dualflow
        >>> x = dualflow.tensor([1.0], requires_grad=True)
        >>> edge(x) is x, edge(x * 2)[1], edge(dualflow.tensor([1.0])), edge(2.0)
        (True, 0, None, None)
    """
    if isinstance(value, _tensor.Tensor) and value.requires_grad:
        return value if value.creator is None else (value.creator, value.output_index)
    return None


def record(
    op: OpDef,
    attrs: dict[str, Any],
    inputs: Any,
    saved_inputs: tuple = (),
    saved_outputs: tuple = (),
    in_shapes: tuple | None = None,
    out_metas: tuple | None = None,
    loc: Any = None,
) -> Node:
    """The tape node of one call of ``op`` on ``inputs`` (its arguments, Tensors or not): one
    ``edge`` per input, the values its backward reads, the input shapes (by default each
    input's ``shape``, ``()`` for a Python scalar). The only place tape nodes are built
    (``tests/autograd/test_record.py``); the caller makes it its outputs' ``creator``.

    Example:
        >>> import dualflow
        >>> from dualflow.ops import OPS
        >>> x = dualflow.tensor([1.0, 2.0], requires_grad=True)
        >>> node = record(OPS["multiply"], {}, (x, 2.0))
        >>> node.edges[0] is x, node.edges[1], node.in_shapes
        (True, None, ((2,), ()))
    """
    tensor = _tensor.Tensor
    edges = []
    for value in inputs:  # edge(value), written out: this runs for every recorded eager op
        if isinstance(value, tensor) and value.requires_grad:
            edges.append(value if value.creator is None else (value.creator, value.output_index))
        else:
            edges.append(None)
    if in_shapes is None:
        in_shapes = tuple([getattr(a, "shape", ()) for a in inputs])
    # the constructor itself (no __init__ frame: this is the eager hot path)
    node = _new(Node)
    node.op, node.attrs, node.edges = op, attrs, tuple(edges)
    node.saved_inputs, node.saved_outputs = saved_inputs, saved_outputs
    node.in_shapes, node.out_metas, node.loc = in_shapes, out_metas, loc
    node.seq = next(_sequence)
    node.needs = None
    return node
