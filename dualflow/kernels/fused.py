"""The kernel of one fused node: its backend's fused (or fused-sum) kernel.

Which kernel runs (numba, the blocked numpy evaluator, CUDA) depends on the array module of the
call, so it is chosen at the first call per module; a host plan's proven steps know it (numpy)
and get the backend kernel at lowering (numba compiles it at its first call either way). A non-C
operand runs eager's own ufuncs instead (``checked``), so the result has eager's layout
(docs/memory-planner.md, "Same layout as eager"); so does a short expression over a strided
operand that numpy lays out C-ordered (the kernel would copy it first: ``STRIDED_MIN_CALLS``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dualflow.kernels.backend import Metas, backend_of
from dualflow.kernels.expr.expression import Expr, compile_numpy
from dualflow.kernels.expr.out_forwards import c_dense, c_ordered

STRIDED_MIN_CALLS = 3
"""Ufunc calls of an expression from which its kernel runs on strided operands that numpy lays
out C-ordered (a slice of an LSTM's gates): the kernel copies each such operand flat, about one
pass, so a short expression is cheaper as eager's ufuncs, which read the strides in place. One
process, 256K float32 slices, one core: 1 call 90 (ufuncs) vs 104 us (copies + kernel), 2 calls
114 vs 124, 3 calls 175 vs 105."""


def fused_kernel(
    expr: Expr,
    args: tuple[str, ...],
    metas: Metas,
    reduce: str | None = None,
    keepdims: bool = False,
    checked: bool = True,
    xp: Any = None,
) -> Callable:
    """``f(xp, *arrays, out=None)`` computing ``expr`` over inputs of ``metas`` ((shape, dtype)
    each), or with ``reduce="sum"`` its sum over all axes (``keepdims``: an output of ones).

    ``checked``: an elementwise kernel writes C-ordered results, so when an operand is not
    C-ordered the call runs eager's own ufuncs instead (unchecked when a plan proved its
    operands C-ordered). Unchecked with a known array module ``xp`` (a CPU plan's), the
    backend's kernel itself, built now: one Python call less per step (~0.4 us of a ~2 us small
    step).

    Example:
        >>> import numpy as np
        >>> e = ("call", "multiply", ("var", "a0"), ("const", 2.0))
        >>> fused_kernel(e, ("a0",), (((3,), "float64"),))(np, np.arange(3.0)).tolist()
        [0.0, 2.0, 4.0]
    """
    if xp is not None and not checked:
        return _backend_kernel(xp, expr, args, metas, (reduce, keepdims))
    built: dict[Any, Callable] = {}
    eager = compile_numpy(expr, args, ())
    ordered = c_ordered if _calls(expr) >= STRIDED_MIN_CALLS else c_dense

    def run(xp: Any, *arrays: Any, out: Any = None, **_attrs: Any) -> Any:
        if checked and reduce is None and not all(map(ordered, arrays)):
            # eager would give an F-ordered (or otherwise non-C) result, the kernels a C one:
            # run eager's own ufuncs so that later reductions see eager's layout (or, for a
            # short expression over strided C-like operands, because they are cheaper)
            return eager(xp, *arrays)
        kernel = built.get(xp)
        if kernel is None:
            kernel = built[xp] = _backend_kernel(xp, expr, args, metas, (reduce, keepdims))
        return kernel(xp, *arrays, out=out)

    return run


def _calls(expr: Expr) -> int:
    """The ufunc calls eager makes for ``expr``."""
    return 1 + sum(_calls(e) for e in expr[2:]) if expr[0] == "call" else 0


def _backend_kernel(xp: Any, expr: Expr, args: tuple, metas: Metas, reduction: tuple) -> Callable:
    """``xp``'s backend kernel of the expression, or of its sum when ``reduction[0]`` is set."""
    reduce, keepdims = reduction
    backend = backend_of(xp)
    if reduce is not None:
        return backend.fused_sum(expr, args, metas, keepdims)
    return backend.fused(expr, args, metas)
