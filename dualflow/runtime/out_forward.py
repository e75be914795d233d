"""Which plan steps write into a caller's buffer (``out=``), and over which inputs: the node-level
view of the op facts (``OpDef.out_forward``, ``node_kernel``, ``inplace_for``).

Elementwise ops whose expression ends in a ufunc write ``out=`` through a rendered forward
(``kernels/expr/out_forwards.py``: checked, it writes only C-ordered operands' results, so the
result has eager's layout); ``matmul`` through ``xp.matmul(a, b, out=out)``; ops with a per-node
kernel (``fused``) take ``out=`` themselves. Other ops allocate."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dualflow.graph_ir.ir import Node, Value
from dualflow.ops.registry import OPS


def node_kernel(node: Node, checked: bool = True, xp: Any = None) -> Callable:
    """The kernel built for this node by its op's ``node_kernel`` (a fused node's); ``xp``: the
    array module every call will pass, when the plan knows it (a CPU plan's numpy).

    Example:
        >>> import numpy as np
        >>> x = Value(0, (2,), "float64")
        >>> n = Node("fused", (x,), (Value(1, (2,), "float64"),),
        ...          {"expr": ("call", "exp", ("var", "a0")), "args": ("a0",)})
        >>> node_kernel(n)(np, np.zeros(2)).tolist()
        [1.0, 1.0]
    """
    metas = tuple((v.shape, v.dtype) for v in node.inputs)
    return OPS[node.op].node_kernel(metas, node.attrs, checked, xp)


def out_kernel(node: Node, checked: bool = True, xp: Any = None) -> Callable | None:
    """The ``out=`` forward of a single-output node, or None when its op always allocates
    (``checked``: see ``kernels.expr.out_forwards.expression_out``; ``xp``: see ``node_kernel``).

    Example:
        >>> x = Value(0, (2, 2), "float32")
        >>> out_kernel(Node("matmul", (x, x), (Value(1, (2, 2), "float32"),))).__name__
        '_matmul_out'
    """
    if writes_outs(node):  # a tuple of arrays (or None) as out=
        return OPS[node.op].out_forward(checked)
    if not writes_out(node):
        return None
    if OPS[node.op].node_kernel is not None:
        return node_kernel(node, checked, xp)
    return OPS[node.op].out_forward(checked)


def writes_out(node: Node) -> bool:
    """Whether the step of ``node`` can write its (single, non-0-d) output into ``out=``:
    0-d results stay allocated (ufuncs with out= return arrays where eager returns scalars).

    Example:
        >>> x = Value(0, (2,), "float32")
        >>> writes_out(Node("fused", (x,), (Value(1, (2,), "float32"),), {"expr": None}))
        True
    """
    op = OPS.get(node.op)
    if op is None or len(node.outputs) != 1 or not node.outputs[0].shape:
        return False
    return op.node_kernel is not None or op.out is not None


def writes_outs(node: Node) -> bool:
    """Whether the step of a multi-output ``node`` can write its results into a tuple of
    arrays given as ``out=`` (an entry None: that result is allocated), as ``adam_update``
    can; only donated state arrays are passed so (``runtime.donation``).

    Example:
        >>> x, s = Value(0, (2,), "float32"), Value(1, (), "float32")
        >>> outs = tuple(Value(k, (2,), "float32") for k in (2, 3, 4))
        >>> writes_outs(Node("adam_update", (x, x, x, x) + (s,) * 6, outs, {"eps": 0.0}))
        True
    """
    op = OPS.get(node.op)
    return op is not None and op.out is not None and op.nout == len(node.outputs) > 1


def inplace_inputs(node: Node, output: int = 0) -> tuple[Value, ...]:
    """The inputs output ``output``'s ``out=`` may be (when exactly its shape and dtype): a
    per-index kernel reads an element's operands before writing it; BLAS, multi-pass and sum
    kernels do not (``OpDef.inplace_for``).

    Example:
        >>> x = Value(0, (2, 2), "float32")
        >>> inplace_inputs(Node("matmul", (x, x), (Value(1, (2, 2), "float32"),)))
        ()
    """
    op = OPS.get(node.op)
    if op is None:
        return ()
    found = (node.inputs[j] for j in op.inplace_for(node.attrs, len(node.inputs), output))
    return tuple(v for v in found if isinstance(v, Value))
