"""The render API of the compile worker: a compile request's kernel, rendered and built here.

A request (``background_compile``) is plain data: the rendered source's stem, the program's
expression, argument names, dtypes, input shapes, output shape, its kind ("map", "sum", or
"entry": a flat kernel's native ``entry``, for ``kernel_chain``) and the kind's extra (the input
written as ``out``, or the sum's output shape). ``build`` renders the
kernel from it exactly as the caller would and compiles it by running it once on zeros, which
saves its machine code in the kernels store; ``compile_worker`` depends on this module alone.
Importing it imports no numba (``fused_sum`` reads ``sum_layout`` here).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np

from dualflow.disk_cache import open_store


def sum_layout(shapes: tuple, shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple]:
    """(loop dims, each input's view shape) of a sum over inputs of ``shapes`` broadcast to
    ``shape``: size-1 axes dropped, and neighbouring axes merged where every input is full on
    both or broadcast on both, so rows are as long as the broadcasting allows.

    Example:
        >>> sum_layout(((8, 3, 4, 5), (3, 1, 1)), (8, 3, 4, 5))
        ((8, 3, 20), ((8, 3, 20), (1, 3, 1)))
    """
    padded = [(1,) * (len(shape) - len(s)) + tuple(s) for s in shapes]
    dims: list[int] = []
    views: list[list[int]] = [[] for _ in shapes]
    last: tuple[bool, ...] | None = None
    for d, size in enumerate(shape):
        if size == 1:
            continue  # every input has size 1 here too
        full = tuple(p[d] != 1 for p in padded)
        if full == last:
            dims[-1] *= size
            for view, p in zip(views, padded):
                view[-1] *= p[d]
        else:
            dims.append(size)
            for view, p in zip(views, padded):
                view.append(p[d])
        last = full
    if not dims:
        return (1,), tuple((1,) for _ in shapes)
    return tuple(dims), tuple(tuple(v) for v in views)


def use_store(directory: Path) -> None:
    """Save the kernels built here in the kernels store at ``directory`` (the caller's).

    Example (not run: it would move this process's kernels store):
        >>> import tempfile
        >>> use_store(Path(tempfile.mkdtemp()))  # doctest: +SKIP
    """
    from dualflow.kernels.numba import numba_elementwise  # noqa: PLC0415 - imports numba

    numba_elementwise.open_store = functools.partial(open_store, directory=directory)


def _plain(value: Any) -> Any:
    """JSON's lists back to the tuples expressions and shapes are made of."""
    return tuple(_plain(v) for v in value) if isinstance(value, list) else value


def build(request: list | tuple) -> None:
    """Compile (and so store) the kernel a request (as JSON reads it) names by running it once
    on zeros; nothing when this process renders it to another source than the caller did
    (another dualflow?): the caller then compiles it itself.

    Example:
        >>> e = ("call", "add", ("var", "a0"), ("var", "a1"))
        >>> build(("?", e, ("a0", "a1"), ("float32",) * 2, ((4,), (4,)), (4,), "map", None))
    """
    from dualflow.kernels.base.native_calls import BLOCK_TYPE  # noqa: PLC0415
    from dualflow.kernels.expr.typed_program import lower_expr  # noqa: PLC0415
    from dualflow.kernels.numba import native_split, numba_elementwise, numba_sum  # noqa: PLC0415

    stem, expr, args, dtypes, shapes, shape, kind, extra = _plain(request)
    program = lower_expr(expr, args, dtypes)
    arrays = [np.zeros(s, d) for s, d in zip(shapes, dtypes)]
    if kind == "sum":
        dims, views = sum_layout(shapes, shape)
        if numba_elementwise.stem(numba_sum.sum_source(program, views)) == stem:
            numba_sum.numba_sum_kernel(program, dims, views, extra)(np, *arrays)
        return
    flat, nest = numba_elementwise.layout(program, shapes, shape)
    source, values = numba_elementwise.render_source(program, flat, nest, extra)
    if kind == "entry" and flat is not None and numba_elementwise.stem(source) == stem:
        # a plan's chain of small steps calls it (kernel_chain); ~0.3 s, so asked only then
        numba_elementwise.load_module(source).entry.compile((BLOCK_TYPE,))
    elif numba_elementwise.stem(source) == stem:
        out = None if extra is None else arrays[extra]
        numba_elementwise.numba_kernel(program, shapes, shape)(np, *arrays, out=out)
        if flat is not None:  # its native parts, which this one-thread process never runs
            module = numba_elementwise.load_module(source)
            native_split.prepare(module, program.dtype, shape, arrays, out, values)
