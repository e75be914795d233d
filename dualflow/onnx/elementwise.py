"""ONNX converters of the elementwise ops: one ONNX op each, or a short decomposition.

Operands are cast to the type the op computes in (the output's for arithmetic, the common one
for comparisons), and Python literals become 0-d initializers of that type, as dualflow's own
promotion (a float32 tensor plus ``1e-5`` stays float32) does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dualflow.graph_ir.ir import Node, Value

Converter = Callable[[Any, Node], list[str]]

_UNARY = {"abs": "Abs", "atan": "Atan", "cos": "Cos", "sin": "Sin", "erf": "Erf", "exp": "Exp"}
_UNARY |= {"log": "Log", "negative": "Neg", "relu": "Relu", "sigmoid": "Sigmoid", "sqrt": "Sqrt"}
_UNARY |= {"tanh": "Tanh", "softplus": "Softplus", "copy": "Identity"}
_UNARY |= {"stop_gradient": "Identity"}
_BINARY = {"add": "Add", "subtract": "Sub", "multiply": "Mul", "divide": "Div", "power": "Pow"}
_BINARY |= {"maximum": "Max", "minimum": "Min"}
_COMPARE = {"equal": "Equal", "greater": "Greater", "greater_equal": "GreaterOrEqual"}
_COMPARE |= {"less": "Less", "less_equal": "LessOrEqual"}


def operand(em: Any, item: Value | int | float | bool, dtype: Any) -> str:
    """``item``'s name as a ``dtype`` tensor (a Cast node when its type differs)."""
    if not isinstance(item, Value):
        return em.name(item, dtype)
    name = em.name(item)
    if np.dtype(item.dtype) == np.dtype(dtype):
        return name
    return em.one("Cast", [name], to=em.helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))


def _out(node: Node) -> np.dtype:
    return np.dtype(node.outputs[0].dtype)


def _operands(em: Any, node: Node, dtype: Any = None) -> list[str]:
    return [operand(em, item, dtype or _out(node)) for item in node.inputs]


def _unary(onnx_op: str) -> Converter:
    return lambda em, node: [em.one(onnx_op, _operands(em, node))]


def _binary(onnx_op: str) -> Converter:
    return lambda em, node: [em.one(onnx_op, _operands(em, node))]


def _compare(onnx_op: str, negate: bool = False) -> Converter:
    def convert(em: Any, node: Node) -> list[str]:
        values = [v.dtype for v in node.value_inputs]
        y = em.one(onnx_op, _operands(em, node, np.result_type(*values)))
        return [em.one("Not", [y]) if negate else y]

    return convert


def _square(em: Any, node: Node) -> list[str]:
    (x,) = _operands(em, node)
    return [em.one("Mul", [x, x])]


def _rsqrt(em: Any, node: Node) -> list[str]:
    return [em.one("Reciprocal", [em.one("Sqrt", _operands(em, node))])]


def _expm1(em: Any, node: Node) -> list[str]:
    (x,) = _operands(em, node)
    return [em.one("Sub", [em.one("Exp", [x]), em.name(1, _out(node))])]


def _log1p(em: Any, node: Node) -> list[str]:
    (x,) = _operands(em, node)
    return [em.one("Log", [em.one("Add", [x, em.name(1, _out(node))])])]


def _silu(em: Any, node: Node) -> list[str]:
    (x,) = _operands(em, node)
    return [em.one("Mul", [x, em.one("Sigmoid", [x])])]


def _gelu(em: Any, node: Node) -> list[str]:
    (x,) = _operands(em, node)
    dtype = _out(node)
    inner = em.one("Erf", [em.one("Mul", [x, em.name(1 / math.sqrt(2), dtype)])])
    half = em.one("Mul", [x, em.name(0.5, dtype)])
    return [em.one("Mul", [half, em.one("Add", [inner, em.name(1, dtype)])])]


def _gelu_tanh(em: Any, node: Node) -> list[str]:
    (x,) = _operands(em, node)
    dtype = _out(node)
    cube = em.one("Mul", [em.one("Mul", [x, x]), x])
    inner = em.one("Add", [x, em.one("Mul", [cube, em.name(0.044715, dtype)])])
    tanh = em.one("Tanh", [em.one("Mul", [inner, em.name(math.sqrt(2 / math.pi), dtype)])])
    half = em.one("Mul", [x, em.name(0.5, dtype)])
    return [em.one("Mul", [half, em.one("Add", [tanh, em.name(1, dtype)])])]


def _fma(em: Any, node: Node) -> list[str]:
    a, b, c = _operands(em, node)
    return [em.one("Add", [em.one("Mul", [a, b]), c])]


def division(em: Any, fn: str, names: list[str], dtype: Any) -> str:
    """remainder/fmod/floor_divide of ``names`` computed in ``dtype``: ONNX's ``Mod`` (``fmod=1``
    is C's; float ``fmod=0`` is not allowed, so a float remainder moves fmod's result by ``b``
    where the signs differ), floor division as ``Floor(a / b)`` for floats and the exact
    ``(a - remainder) / b`` for integers."""
    a, b = names
    floats = np.dtype(dtype).kind == "f"
    if fn == "fmod":
        return em.one("Mod", [a, b], fmod=1)
    if fn == "floor_divide" and floats:
        return em.one("Floor", [em.one("Div", [a, b])])
    if floats:
        r = em.one("Mod", [a, b], fmod=1)
        zero = em.name(0, dtype)
        signs = em.one("Xor", [em.one("Less", [r, zero]), em.one("Less", [b, zero])])
        moved = em.one("And", [em.one("Not", [em.one("Equal", [r, zero])]), signs])
        r = em.one("Where", [moved, em.one("Add", [r, b]), r])
    else:
        r = em.one("Mod", [a, b], fmod=0)
    return r if fn == "remainder" else em.one("Div", [em.one("Sub", [a, r]), b])


def _division(fn: str) -> Converter:
    return lambda em, node: [division(em, fn, _operands(em, node), _out(node))]


def _where(em: Any, node: Node) -> list[str]:
    cond = operand(em, node.inputs[0], np.bool_)
    a, b = (operand(em, item, _out(node)) for item in node.inputs[1:])
    return [em.one("Where", [cond, a, b])]


def _cast(em: Any, node: Node) -> list[str]:
    x = em.name(node.inputs[0])
    return [em.one("Cast", [x], to=em.helper.np_dtype_to_tensor_dtype(_out(node)))]


def _clip(em: Any, node: Node) -> list[str]:
    (x,) = _operands(em, node)
    lo, hi = node.attrs.get("lo"), node.attrs.get("hi")
    bounds = [em.name(b, _out(node)) if b is not None else "" for b in (lo, hi)]
    return [em.one("Clip", [x, *bounds])]


def _elu(em: Any, node: Node) -> list[str]:
    return [em.one("Elu", _operands(em, node), alpha=float(node.attrs["alpha"]))]


def _leaky_relu(em: Any, node: Node) -> list[str]:
    return [em.one("LeakyRelu", _operands(em, node), alpha=float(node.attrs["slope"]))]


ELEMENTWISE: dict[str, Converter] = {
    **{op: _unary(onnx_op) for op, onnx_op in _UNARY.items()},
    **{op: _binary(onnx_op) for op, onnx_op in _BINARY.items()},
    **{op: _compare(onnx_op) for op, onnx_op in _COMPARE.items()},
    "not_equal": _compare("Equal", negate=True),
    "square": _square,
    "rsqrt": _rsqrt,
    "expm1": _expm1,
    "log1p": _log1p,
    "silu": _silu,
    "gelu": _gelu,
    "gelu_tanh": _gelu_tanh,
    "fma": _fma,
    **{fn: _division(fn) for fn in ("remainder", "fmod", "floor_divide")},
    "where": _where,
    "cast": _cast,
    "clip": _clip,
    "elu": _elu,
    "leaky_relu": _leaky_relu,
}
