"""numba kernels for fused sums of arithmetic-only expressions: each element is computed and added
into float64 (or integer) lanes as it is made, so the elementwise intermediate never exists.
Rendered and loaded like the elementwise kernels (``numba_elementwise``: source kept signed for
people to read, machine code through the signed cache).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dualflow.kernels.expr.typed_program import Program, sum_dtypes
from dualflow.kernels.numba.numba_elementwise import (
    NJIT,
    header,
    imports,
    load_module,
    render_steps,
    scalar_type,
)

# Independent accumulators of a fused sum, a local array LLVM can vectorize over. Without
# fastmath (which numba would apply to the inlined element expression too, changing its rounding)
# one float64 accumulator is a chain of dependent adds. 4M float32, ms for x*x / (x-y)**2 /
# maximum(x,0)*y: 16 lanes 1.32/1.81/1.78, 32 lanes 1.38/0.78/0.75 (some loops left scalar),
# 64 lanes 0.45/0.79/0.74 (numpy eager 1.41/2.28/2.90).
LANES = 64
# Elements added into the lanes (of one row, or of several short ones) before the lanes join the
# total: with float64 lanes the rounding error stays near float64's own whatever the size, as
# with numpy's pairwise blocks.
CHUNK = 4096


def _chunk_loop(names: list[str], prefixes: list[str | None]) -> list[str]:
    """The lanes along the last axis (``dims[-1]`` elements), added to ``total``: input k is the
    row ``names[k][prefixes[k] start:start + m]``, or the scalar ``x<k>`` if its prefix is None."""
    rows = [f"r{k}" if p is not None else f"x{k}" for k, p in enumerate(prefixes)]

    def element(index: str) -> str:
        loads = (f"{r}[{index}]" if p is not None else r for r, p in zip(rows, prefixes))
        return f"element({', '.join(loads)})"

    slices = [
        f"r{k} = {name}[{p}start:start + m]"
        for k, (name, p) in enumerate(zip(names, prefixes))
        if p is not None
    ]
    inner = [
        *slices,
        f"stop = m - m % {LANES}",
        f"for j in range(0, stop, {LANES}):",
        f"    for k in range({LANES}):",
        f"        lanes[k] += {element('j + k')}",
        "for j in range(stop, m):",  # the rest, one lane each: no chain of dependent adds
        f"    lanes[j - stop] += {element('j')}",
        "pending += m",
        f"if pending >= {CHUNK}:",  # short rows share a fold, so its cost stays per chunk
        f"    for k in range({LANES}):",
        "        total += lanes[k]",
        "    lanes[:] = 0",
        "    pending = 0",
    ]
    head = [f"for start in range(0, dims[-1], {CHUNK}):", f"    m = min({CHUNK}, dims[-1] - start)"]
    return head + ["    " + line for line in inner]


def render_sum_source(
    program: Program, pattern: tuple[tuple[bool, ...], ...], acc: np.dtype, dtype: np.dtype
) -> str:
    """Python source of ``kernel(out, dims, *inputs)`` writing the sum of the program over the
    shape ``dims``, added in ``acc`` and cast to ``dtype``, into ``out[0]``.

    Input k is C-contiguous with ``len(dims)`` axes, ``pattern[k][d]`` saying whether axis d is
    full (else size 1, broadcast): loops run over the leading axes and lanes along the last one,
    where a broadcast input is one scalar per row.

    Example:
        >>> from dualflow.kernels.expr.typed_program import lower_expr
        >>> p = lower_expr(("call", "multiply", ("var", "a0"), ("var", "a0")), ("a0",), ("int32",))
        >>> src = render_sum_source(p, ((True,),), np.dtype("int64"), np.dtype("int64"))
        >>> "return np.int64(t0)" in src and "def kernel(out, dims, in0):" in src
        True
    """
    consts: list[tuple] = []
    count, ndim = len(program.in_dtypes), len(pattern[0])
    names = [f"in{k}" for k in range(count)]
    acc_t, out_t = scalar_type(acc), scalar_type(dtype)
    element = [f"def element({', '.join(f'x{k}' for k in range(count))}):"]
    element += ["    " + line for line in render_steps(program, consts)]
    element.append(f"    return {acc_t}(t{len(program.steps) - 1})")
    body = ["    " * d + f"for i{d} in range(dims[{d}]):" for d in range(ndim - 1)]
    prefixes: list[str | None] = []
    for k, axes in enumerate(pattern):
        index = "".join(f"{f'i{d}' if full else 0}, " for d, full in enumerate(axes[:-1]))
        if not axes[-1]:  # broadcast along the rows: one load per row
            body.append("    " * (ndim - 1) + f"x{k} = {names[k]}[{index}0]")
        prefixes.append(index if axes[-1] else None)
    body += ["    " * (ndim - 1) + line for line in _chunk_loop(names, prefixes)]
    body = [f"lanes = np.zeros({LANES}, {acc_t})", f"total = {acc_t}(0)", "pending = 0", *body]
    body += [f"for k in range({LANES}):", "    total += lanes[k]", f"out[0] = {out_t}(total)"]
    # the header last: it holds the constants the element's statements collected
    lines = header(consts, imports(program)) + element + ["", "", NJIT]
    lines.append(f"def kernel(out, dims, {', '.join(names)}):")
    return "\n".join(lines + ["    " + line for line in body]) + "\n"


def sum_source(program: Program, views: tuple) -> str:
    """The source of ``numba_sum_kernel``'s kernel for inputs viewed as ``views``.

    Example:
        >>> from dualflow.kernels.expr.typed_program import lower_expr
        >>> p = lower_expr(("call", "negative", ("var", "a0")), ("a0",), ("float32",))
        >>> "def kernel(out, dims, in0):" in sum_source(p, ((4,),))
        True
    """
    acc, dtype = sum_dtypes(program.dtype)
    pattern = tuple(tuple(d != 1 for d in view) for view in views)
    return render_sum_source(program, pattern, acc, dtype)


def numba_sum_kernel(
    program: Program, dims: tuple[int, ...], views: tuple, out_shape: tuple[int, ...]
) -> Callable:
    """``f(xp, *arrays, out=None)``: the sum of the program over the loop shape ``dims`` (input k
    viewed C-contiguous as ``views[k]``: ``kernel_requests.sum_layout``), as an array of
    ``out_shape`` in numpy's sum dtype, written into ``out`` when given; floats add in float64.

    Example:
        >>> from dualflow.kernels.expr.typed_program import lower_expr
        >>> p = lower_expr(("call", "add", ("var", "a0"), ("const", 1)), ("a0",), ("int32",))
        >>> numba_sum_kernel(p, (3,), ((3,),), ())(np, np.arange(3, dtype=np.int32)).item()
        6
    """
    dtype = sum_dtypes(program.dtype)[1]
    kernel = load_module(sum_source(program, views)).kernel

    def run(xp: Any, *arrays: Any, out: Any = None, **_attrs: Any) -> Any:
        if out is None:
            out = np.empty(out_shape, dtype)
        ins = (np.ascontiguousarray(a).reshape(v) for a, v in zip(arrays, views))
        kernel(out.reshape(1), dims, *ins)
        return out

    return run
