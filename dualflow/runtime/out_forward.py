"""Forwards that write into a caller's buffer (``out=``), for steps the memory planner assigns.

Elementwise ops whose expression ends in a numpy ufunc get a rendered ``forward_out`` passing
``out=out`` to that last call. numpy allocates a ufunc's result in its operands' memory order
(``order='K'``), and a C-ordered buffer in place of eager's F-ordered result would change the
summation order of every later reduction (docs/memory-planner.md, "Same layout as eager"), so
the checked variant writes ``out`` only when every operand is C-contiguous and otherwise returns
eager's own result; a plan uses the unchecked one where its operands are proven C-ordered.
``matmul`` (always C-ordered) uses ``xp.matmul(a, b, out=out)``; ``fused`` nodes' kernels take
``out=`` themselves. Other ops allocate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dualflow.graph_ir.ir import Node
from dualflow.kernels.out import expression_out
from dualflow.kernels.scalar import FUNCTIONS
from dualflow.ops.registry import OPS, OpDef


def _matmul_out(xp: Any, a: Any, b: Any, *, out: Any) -> Any:
    return xp.matmul(a, b, out=out)


def elementwise_out(op: OpDef, checked: bool = True) -> Callable | None:
    """``forward_out(xp, *args, out, **attrs)`` of an elementwise op, or None if not a ufunc
    (``kernels.out.expression_out``).

    Example:
        >>> import numpy as np
        >>> buf = np.empty(2)
        >>> elementwise_out(OPS["relu"])(np, np.array([-1.0, 2.0]), out=buf) is buf
        True
    """
    if op.kind != "elementwise" or op.expr is None:
        return None
    return expression_out(op.name, op.expr, op.args, op.attr_names, checked)


def out_kernel(node: Node, checked: bool = True) -> Callable | None:
    """The ``out=`` forward of a single-output node, or None when its op always allocates
    (``checked``: see ``elementwise_out``; matmul's result is C-ordered whatever its operands).

    Example:
        >>> from dualflow.graph_ir.ir import Value
        >>> x = Value(0, (2, 2), "float32")
        >>> out_kernel(Node("matmul", (x, x), (Value(1, (2, 2), "float32"),))).__name__
        '_matmul_out'
    """
    if len(node.outputs) != 1 or not node.outputs[0].shape:
        return None  # 0-d results: ufuncs with out= return arrays where eager returns scalars
    if node.op == "matmul":
        return _matmul_out
    op = OPS.get(node.op)
    return elementwise_out(op, checked) if op is not None else None


def writes_out(node: Node) -> bool:
    """Whether the step of ``node`` can write its (single, non-0-d) output into ``out=``.

    Example:
        >>> from dualflow.graph_ir.ir import Value
        >>> x = Value(0, (2,), "float32")
        >>> writes_out(Node("fused", (x,), (Value(1, (2,), "float32"),), {"expr": None}))
        True
    """
    if node.op == "fused":
        return len(node.outputs) == 1 and bool(node.outputs[0].shape)
    return out_kernel(node) is not None


def inplace_safe(node: Node) -> bool:
    """Whether ``out=`` may be one of the node's inputs of exactly the output's shape and dtype.

    Per-index elementwise kernels read an index's inputs before writing it; matmul (BLAS) does
    not, and the blocked evaluator's ``where``/``astype``/``erf`` write ``out`` in several passes.
    A fused sum is never in place (its keepdims output could only alias a one-element input).

    Example:
        >>> from dualflow.graph_ir.ir import Value
        >>> x = Value(0, (2, 2), "float32")
        >>> inplace_safe(Node("matmul", (x, x), (Value(1, (2, 2), "float32"),)))
        False
    """
    if node.op == "matmul":
        return False
    if node.op == "fused":
        expr = node.attrs["expr"]
        if node.attrs.get("reduce") is not None:
            return False  # a sum's output is not an element of its input: never share a buffer
        return expr[0] == "call" and FUNCTIONS[expr[1]].inplace
    return True
