"""Elementwise forwards that write into a caller's buffer (``out=``), rendered from the expression.

An expression whose last call is a ufunc (the scalar-function table's ``out`` column) gets a
``forward_out`` passing ``out=out`` to that call. numpy allocates a ufunc's result in its
operands' memory order (``order='K'``), and a C-ordered buffer in place of eager's F-ordered
result would change the summation order of every later reduction (docs/memory-planner.md, "Same
layout as eager"), so the checked variant writes ``out`` only when every operand is C-ordered
(C-contiguous, or a C array broadcast) and otherwise returns eager's own result; a plan uses the
unchecked one where its operands are proven C-ordered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dualflow.kernels.expr.expression import XP_FUNCTIONS, Expr, render_numpy
from dualflow.kernels.expr.scalar_table import FUNCTIONS
from dualflow.kernels.expr.typed_program import lower_expr

_CACHE: dict[tuple, Callable | None] = {}


def c_ordered(value: Any) -> bool:
    """Whether numpy lays an elementwise result of ``value`` out C-ordered (its ``order='K'``):
    ``value`` is a Python scalar, a C-contiguous array (numpy or cupy), or a view whose moving
    axes (stride not 0, extent above 1) step through memory by less from each axis to the next
    inner one: a C array broadcast (``graph_ir.layout.C_BROADCAST``), sliced (a gate of an LSTM's
    (L, N, 4, H) gates), stepped through or reversed.

    Example:
        >>> import numpy as np
        >>> c_ordered(2.0), c_ordered(np.ones((2, 3))), c_ordered(np.ones((2, 3)).T)
        (True, True, False)
        >>> c_ordered(np.broadcast_to(np.ones((2, 1)), (2, 3)))  # a column across the rows
        True
        >>> c_ordered(np.ones((4, 2, 3))[:, 1]), c_ordered(np.ones((4, 3))[:, ::-2])
        (True, True)
    """
    flags = getattr(value, "flags", None)
    return flags is None or bool(flags.c_contiguous) or _c_like(value)


def c_dense(value: Any) -> bool:
    """Whether ``value`` is a Python scalar, a C-contiguous array or one broadcast (zero strides
    added, the others a C array's): ``c_ordered`` operands a kernel reads without a copy.

    Example:
        >>> import numpy as np
        >>> c_dense(np.ones((2, 3))), c_dense(np.ones((4, 2, 3))[:, 1])
        (True, False)
        >>> c_dense(np.broadcast_to(np.ones((2, 1)), (2, 3)))
        True
    """
    flags = getattr(value, "flags", None)
    return flags is None or bool(flags.c_contiguous) or _c_broadcast(value)


def _c_broadcast(array: Any) -> bool:
    # the axes that move (stride not 0, extent above 1) are those of a C array, innermost first
    expected = array.itemsize
    for extent, stride in zip(reversed(array.shape), reversed(array.strides), strict=True):
        if stride == 0 or extent == 1:
            continue
        if stride != expected:
            return False
        expected *= extent
    return True


def _c_like(array: Any) -> bool:
    # numpy sorts a result's axes by its operands' absolute strides; strictly falling ones on
    # every moving axis leave them in C order, so an operand like this gives eager's layout (a
    # loss's gradient broadcast over an activation, and a slice of the LSTM's gates, took
    # eager's allocating path before: 173 against 100 us for a gate's sigmoid gradient)
    last = None
    for extent, stride in zip(array.shape, array.strides, strict=True):
        if stride == 0 or extent == 1:
            continue
        if last is not None and abs(stride) >= last:
            return False
        last = abs(stride)
    return True


def writes_out(expr: Expr | None) -> bool:
    """Whether an expression ends in a call that takes ``out=`` (a ufunc).

    Example:
        >>> writes_out(("call", "exp", ("var", "x"))), writes_out(("call", "erf", ("var", "x")))
        (True, False)
    """
    return expr is not None and expr[0] == "call" and FUNCTIONS[expr[1]].out


def expression_out(
    name: str, expr: Expr, args: tuple[str, ...], attrs: tuple[str, ...], checked: bool = True
) -> Callable | None:
    """``forward_out(xp, *args, out, **attrs)`` of the expression, or None when its last call
    takes no ``out=``; built once per (expression, checked).

    ``checked``: it writes ``out`` only when every operand is C-ordered (``c_ordered``), so that
    the result has the layout eager's allocating call gives it (numpy's ``order='K'``: C when the
    operands are); otherwise it returns eager's own result and leaves ``out`` unused. Unchecked,
    for a plan that proved its operands C-ordered, it always writes ``out``.

    Example:
        >>> import numpy as np
        >>> f = expression_out("relu", ("call", "maximum", ("var", "x"), ("const", 0)), ("x",), ())
        >>> buf = np.empty(2); f(np, np.array([-1.0, 2.0]), out=buf) is buf
        True
    """
    key = (expr, args, attrs, checked)
    if key in _CACHE:
        return _CACHE[key]
    function = None
    if writes_out(expr):
        operands = ", ".join(render_numpy(e) for e in expr[2:])
        keywords = "".join(f", {a}" for a in attrs)
        ordered = " and ".join(f"_c({a})" for a in args) or "True"
        check = f"    if not ({ordered}):\n        return {render_numpy(expr)}\n"
        source = (
            f"def forward_out(xp, {', '.join(args)}, *, out{keywords}):\n"
            + (check if checked else "")
            + f"    return {_callee(expr[1])}{operands}, out=out)\n"
        )
        namespace: dict[str, Any] = {**XP_FUNCTIONS, "_c": c_ordered}
        exec(compile(source, f"<dualflow out {name}>", "exec"), namespace)
        function = namespace["forward_out"]
    _CACHE[key] = function
    return function


def _callee(name: str) -> str:
    """What an ``out=`` forward calls: ``_<name>(xp, ...`` when the row has its own function
    (tanh, exp), else the ufunc ``xp.<ufunc>(...``."""
    row = FUNCTIONS[name]
    return f"_{name}(xp, " if row.xp_function is not None else f"xp.{row.ufunc}("


def _typing_tree(expr: Expr, scalars: frozenset, attrs: dict) -> Expr:
    """``expr`` with attributes as their values and Python-scalar operands as constants."""
    if expr[0] == "attr":
        return ("const", attrs[expr[1]])
    if expr[0] == "var" and expr[1] in scalars:
        return ("const", 0.0)
    if expr[0] == "call":
        return ("call", expr[1], *(_typing_tree(a, scalars, attrs) for a in expr[2:]))
    return expr


def expression_scratch(expr: Expr, args: tuple[str, ...], metas: tuple, attrs: dict) -> int:
    """Bytes of the temporaries numpy allocates for an expression's inner calls (each call's
    result but the last, which is the op's own): an upper bound, as if all lived at once.
    ``metas``: (shape, dtype) per argument, None for a Python scalar operand.

    Example:
        >>> e = ("call", "where", ("call", "greater", ("var", "y"), ("const", 0)),
        ...      ("var", "g"), ("const", 0))
        >>> expression_scratch(e, ("y", "g"), (((4, 8), "float32"), ((4, 8), "float32")), {})
        32
    """
    if not any(part[0] == "call" for part in expr[2:]):  # one call: its result is the op's
        return 0
    arrays = [(a, m) for a, m in zip(args, metas) if m is not None]
    scalars = frozenset(a for a, m in zip(args, metas) if m is None)
    names, dtypes = tuple(a for a, _ in arrays), tuple(np.dtype(m[1]).name for _, m in arrays)
    try:
        steps = lower_expr(_typing_tree(expr, scalars, attrs), names, dtypes).steps
    except (KeyError, TypeError, ValueError):  # an estimate never stops a plan: count nothing
        return 0
    if len(steps) < 2:
        return 0
    size = int(np.prod(np.broadcast_shapes(*(tuple(m[0]) for _, m in arrays)), dtype=np.int64))
    return size * sum(step.dtype.itemsize for step in steps[:-1])
