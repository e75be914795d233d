"""The ONNX converter of ``fused`` nodes: the region's expression expanded back into its ops.

A graph after the passes (a compiled trace's ``graph``, a saved graph file) holds ``fused``
nodes: one expression over several inputs, optionally ending in a sum over all axes. The
expression is lowered with the kernels' own typing (``lower_expr``: numpy's promotion, weak
Python scalars included), so every step is emitted computing in the type the fused kernel
computes in, then cast to the step's result type.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.graph_ir.ir import Node, Value
from dualflow.kernels.expr.typed_program import lower_expr
from dualflow.onnx.capture import ExportError
from dualflow.onnx.elementwise import division

_DIRECT = {"add": "Add", "subtract": "Sub", "multiply": "Mul", "divide": "Div", "power": "Pow"}
_DIRECT |= {"maximum": "Max", "minimum": "Min", "negative": "Neg", "exp": "Exp", "log": "Log"}
_DIRECT |= {"sqrt": "Sqrt", "abs": "Abs", "sin": "Sin", "cos": "Cos", "tanh": "Tanh"}
_DIRECT |= {"atan": "Atan", "erf": "Erf", "greater": "Greater", "less": "Less"}
_DIRECT |= {"greater_equal": "GreaterOrEqual", "less_equal": "LessOrEqual", "equal": "Equal"}


def convert_fused(em: Any, node: Node) -> list[str]:
    """Emit the steps of ``node``'s expression; returns the output's name."""
    attrs = node.attrs
    kinds = [v.dtype if isinstance(v, Value) else type(v) for v in node.inputs]
    program = lower_expr(attrs["expr"], attrs["args"], tuple(kinds))
    results: list[str] = []
    for step in program.steps:
        operands = [_ref(em, node, ref, results) for ref in step.operands]
        results.append(_step(em, step, operands))
    y = results[-1]
    shapes = [v.shape for v in node.value_inputs]
    full = tuple(np.broadcast_shapes(*shapes)) if shapes else ()
    y = em.one("Expand", [y, em.ints(full)])  # an input the expression ignores still broadcasts
    out = np.dtype(node.outputs[0].dtype)
    if attrs.get("reduce") is not None:
        if attrs["reduce"] != "sum":
            raise ExportError(f"a fused {attrs['reduce']!r} reduction has no converter")
        y = em.one("ReduceSum", [_cast(em, y, out)], keepdims=int(bool(attrs["keepdims"])))
    return [_cast(em, y, out) if program.dtype != out else y]


def _ref(em: Any, node: Node, ref: tuple, results: list[str]) -> tuple[str, Any]:
    """(name, dtype or None) of a step operand; constants are typed at use."""
    if ref[0] == "step":
        return results[ref[1]], None
    if ref[0] == "const":
        return ("const", ref[1]), None
    item = node.inputs[ref[1]]
    return ("const", item) if not isinstance(item, Value) else (em.name(item), item.dtype)


def _as(em: Any, item: tuple[Any, Any], dtype: np.dtype) -> str:
    name, known = item
    if isinstance(name, tuple):  # a constant or a literal input: typed by its use
        return em.name(np.asarray(name[1]).item(), dtype)
    if known is not None and np.dtype(known) == dtype:
        return name
    return _cast(em, name, dtype)


def _cast(em: Any, name: str, dtype: np.dtype) -> str:
    return em.one("Cast", [name], to=em.helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))


def _step(em: Any, step: Any, operands: list[tuple[str, Any]]) -> str:
    fn, ctype = step.fn, step.ctype
    if fn == "astype":
        target = np.dtype(operands[1][0][1]) if isinstance(operands[1][0], tuple) else step.dtype
        return _as(em, operands[0], target)
    if fn == "where":
        cond = _as(em, operands[0], np.dtype(bool))
        a, b = (_as(em, item, ctype) for item in operands[1:])
        return em.one("Where", [cond, a, b])
    names = [_as(em, item, ctype) for item in operands]
    if fn == "not_equal":
        return em.one("Not", [em.one("Equal", names)])
    if fn == "log1p":
        return em.one("Log", [em.one("Add", [names[0], em.name(1, ctype)])])
    if fn == "expm1":
        return em.one("Sub", [em.one("Exp", names), em.name(1, ctype)])
    if fn in ("remainder", "fmod", "floor_divide"):
        return division(em, fn, names, ctype)
    if fn not in _DIRECT:
        raise ExportError(f"the fused expression calls {fn!r}, which has no ONNX converter")
    y = em.one(_DIRECT[fn], names)
    return y if step.dtype == ctype or step.dtype == np.dtype(bool) else _cast(em, y, step.dtype)
