"""Scalar expressions of elementwise ops: parsing, and rendering to numpy/cupy code.

An elementwise op is defined by one expression such as ``where(x > 0, x, x * slope)``. The parsed
tree is plain nested tuples (hashable, printable, usable as an IR attribute), so the same tree
drives the eager forward, fusion and the kernel renderers.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dualflow.kernels.expr.scalar_table import BY_SYMBOL, TABLE
from dualflow.kernels.expr.scalar_table import FUNCTIONS as SCALAR

# The Python operators of the expression language; the table says which function each one is.
_SYMBOLS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.Pow: "**",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Eq: "==",
    ast.NotEq: "!=",
}
# Functions an expression may call, with their arity (one row each in scalar.TABLE).
FUNCTIONS = {row.name: row.arity for row in TABLE}
# Array-module functions generated code calls as ``_<name>(xp, ...)`` (erf, tanh, exp).
XP_FUNCTIONS = {f"_{row.name}": row.xp_function for row in TABLE if row.xp_function}

Expr = tuple  # ("var", name) | ("const", number) | ("attr", name) | ("call", fn, *args)


def parse_expr(text: str, args: tuple[str, ...], attrs: tuple[str, ...] = ()) -> Expr:
    """Parse an expression over input names ``args`` and attribute names ``attrs``.

    Example:
        >>> parse_expr("x * 2", ("x",))
        ('call', 'multiply', ('var', 'x'), ('const', 2))
    """
    tree = ast.parse(text, mode="eval").body
    return _convert(tree, args, attrs, text)


def _convert(node: ast.AST, args: tuple[str, ...], attrs: tuple[str, ...], text: str) -> Expr:
    def sub(child: ast.AST) -> Expr:
        return _convert(child, args, attrs, text)

    if isinstance(node, ast.BinOp) and _SYMBOLS.get(type(node.op)) in BY_SYMBOL:
        return ("call", BY_SYMBOL[_SYMBOLS[type(node.op)]], sub(node.left), sub(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return ("call", "negative", sub(node.operand))
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        name = BY_SYMBOL.get(_SYMBOLS.get(type(node.ops[0]), ""))
        if name is not None:
            return ("call", name, sub(node.left), sub(node.comparators[0]))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        name = node.func.id
        if FUNCTIONS.get(name) != len(node.args) or node.keywords:
            raise ValueError(f"expression {text!r}: unknown function or arity: {name}")
        return ("call", name, *(sub(a) for a in node.args))
    if isinstance(node, ast.Name):
        if node.id in args:
            return ("var", node.id)
        if node.id in attrs:
            return ("attr", node.id)
        raise ValueError(f"expression {text!r}: unknown name {node.id!r}")
    if isinstance(node, ast.Constant) and type(node.value) in (int, float, bool):
        return ("const", node.value)
    raise ValueError(f"expression {text!r}: unsupported syntax {ast.dump(node)}")


def check_expr(expr: Any, args: tuple[str, ...], attrs: tuple[str, ...] = ()) -> None:
    """Raise ValueError unless ``expr`` is a well-formed expression: calls of ``FUNCTIONS`` with
    their arity, names of ``args``/``attrs``, and constants that are plain numbers (or, as the
    second operand of ``astype``, a numpy dtype name). Kernel renderers write an expression into
    source code, so one read from a file must pass this first.

    Example:
        >>> check_expr(("call", "exp", ("var", "x")), ("x",))
        >>> check_expr(("call", "__import__", ("const", "os")), ())
        Traceback (most recent call last):
        ...
        ValueError: bad expression: unknown function '__import__'
    """
    try:
        _check(expr, args, attrs, dtype=False)
    except RecursionError:
        raise ValueError("bad expression: nested too deeply") from None


def _check(expr: Any, args: tuple, attrs: tuple, dtype: bool) -> None:
    if type(expr) is not tuple or not expr or type(expr[0]) is not str:
        raise ValueError(f"bad expression: {expr!r} is not an expression node")
    kind = expr[0]
    if kind in ("var", "attr") and len(expr) == 2:
        if expr[1] not in (args if kind == "var" else attrs):
            raise ValueError(f"bad expression: unknown name {expr[1]!r}")
    elif kind == "const" and len(expr) == 2:
        if not (_number(expr[1]) or (dtype and _dtype_name(expr[1]))):
            raise ValueError(f"bad expression: constant {expr[1]!r} is not a number")
    elif kind == "call" and len(expr) > 1 and FUNCTIONS.get(expr[1]) is not None:
        if FUNCTIONS[expr[1]] != len(expr) - 2:
            raise ValueError(f"bad expression: {expr[1]} takes {FUNCTIONS[expr[1]]} operands")
        for kind, operand in zip(SCALAR[expr[1]].kinds(), expr[2:]):
            _check(operand, args, attrs, dtype=kind == "dtype")
    elif kind == "call":
        raise ValueError(f"bad expression: unknown function {expr[1:2] and expr[1]!r}")
    else:
        raise ValueError(f"bad expression: {expr!r}")


def _number(value: Any) -> bool:
    if isinstance(value, np.generic | np.ndarray) and np.ndim(value) == 0:
        return np.asarray(value).dtype.kind in "biuf"
    return type(value) in (bool, int, float)


def number_source(value: Any) -> str:
    """A number as Python source: ``repr`` of a plain bool/int/float (numpy scalars unwrapped),
    ``float('inf')``-style for non-finite floats (``repr`` gives ``inf``, not an expression),
    never other text.

    Example:
        >>> number_source(np.float32(0.5)), number_source(-np.inf), number_source(3)
        ('0.5', "float('-inf')", '3')
    """
    if isinstance(value, np.generic | np.ndarray) and np.ndim(value) == 0:
        value = value.item()
    if type(value) not in (bool, int, float):
        raise NotImplementedError(f"a kernel constant must be a number, not {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    return repr(value)


def _dtype_name(value: Any) -> bool:
    if type(value) is not str or not value.isidentifier():
        return False
    try:
        return np.dtype(value).kind in "biufc"
    except TypeError:
        return False


def render_numpy(expr: Expr) -> str:
    """Render an expression tree as Python source calling ``xp`` functions.

    Example:
        >>> render_numpy(parse_expr("exp(-x)", ("x",)))  # exp: numpy's float32 loop is ours
        '_exp(xp, xp.negative(x))'
    """
    kind = expr[0]
    if kind in ("var", "attr") and type(expr[1]) is str and expr[1].isidentifier():
        return expr[1]
    if kind == "const" and _number(expr[1]):
        return number_source(expr[1])
    if kind == "const" and _dtype_name(expr[1]):
        return repr(expr[1])
    if kind != "call" or FUNCTIONS.get(expr[1]) != len(expr) - 2:  # only checked text
        raise ValueError(f"bad expression: {expr!r}")
    row, operands = SCALAR[expr[1]], [render_numpy(e) for e in expr[2:]]
    if row.xp_function is not None:  # an XP_FUNCTIONS entry (tanh: ours for numpy's float32)
        return f"_{row.name}(xp, {', '.join(operands)})"
    if row.ufunc is not None:
        return f"xp.{row.ufunc}({', '.join(operands)})"
    if row.numpy is None:
        raise ValueError(f"bad expression: no numpy rendering for {row.name}")
    return row.numpy.format(*operands)


def compile_numpy(
    expr: Expr,
    args: tuple[str, ...],
    attrs: tuple[str, ...],
    device: Callable | None = None,
    big: tuple[int, Callable] | None = None,
) -> Callable:
    """Build ``forward(xp, *args, **attrs)`` from an expression (once, at op registration).

    With ``device``, any ``xp`` other than numpy goes to ``device(xp, args, attrs)`` (its
    backend's elementwise kernels: ``backend.device_elementwise``); the numpy path pays one identity
    check for it. With ``big = (size, kernel)``, numpy calls whose first argument has at least
    ``size`` elements go to ``kernel(*arrays)`` first (``fused_elementwise.eager_kernel``: one pass
    on both cores), which returns None for arguments it does not take.

    Example:
        >>> import numpy as np
        >>> f = compile_numpy(parse_expr("x + a", ("x",), ("a",)), ("x",), ("a",))
        >>> float(f(np, np.float64(1.0), a=2.0))
        3.0
    """
    params = ", ".join(args) + (", *, " + ", ".join(attrs) if attrs else "")
    branch = ""
    if device is not None:
        arrays = "".join(f"{a}, " for a in args)
        values = ", ".join(f"{a!r}: {a}" for a in attrs)
        branch = f"    if xp is not _np:\n        return _device(xp, ({arrays}), {{{values}}})\n"
    if big is not None:
        arrays, first = ", ".join(args), args[0]
        branch += (
            f"    if xp is _np and getattr({first}, 'size', 0) >= _big_size:\n"
            f"        result = _big({arrays})\n"
            "        if result is not None:\n"
            "            return result\n"
        )
    source = f"def forward(xp, {params}):\n{branch}    return {render_numpy(expr)}\n"
    namespace: dict[str, Any] = {**XP_FUNCTIONS, "_np": np, "_device": device}
    if big is not None:
        namespace["_big_size"], namespace["_big"] = big
    exec(compile(source, f"<dualflow expr {render_numpy(expr)}>", "exec"), namespace)
    return namespace["forward"]


def whole_ufunc(expr: Expr, args: tuple[str, ...]) -> Callable | None:
    """The numpy ufunc that an expression is on numpy operands when it is that one call on
    ``args`` in order (``a * b``: ``np.multiply``), else None: eager calls it without the op's
    forward frame (~0.15 us of a ~2 us op).

    Example:
        >>> whole_ufunc(parse_expr("a * b", ("a", "b")), ("a", "b")) is np.multiply
        True
        >>> whole_ufunc(parse_expr("b * a", ("a", "b")), ("a", "b"))  # not in order
    """
    if expr[0] != "call" or expr[2:] != tuple(("var", a) for a in args):
        return None
    ufunc = getattr(np, expr[1], None)
    if render_numpy(expr) != f"xp.{expr[1]}({', '.join(args)})" or not isinstance(ufunc, np.ufunc):
        return None  # numpy's call is not that ufunc (tanh: ours for float32)
    return ufunc
