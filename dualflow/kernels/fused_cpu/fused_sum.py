"""CPU kernels for ``fused`` nodes ending in a full ``sum``: elements are added as they are made.

numba (``numba_sum.numba_sum_kernel``) where the elementwise part would use numba; else the
blocked numpy evaluator's chunks, each summed (floats in float64) right after it is computed, so
the elementwise intermediate never exists in full. Results are numpy's sum dtype and shape.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dualflow.kernels.base.cpu_threads import run_parts, threads
from dualflow.kernels.expr.typed_program import Program, lower_expr, sum_dtypes
from dualflow.kernels.fused_cpu import fused_elementwise as kc
from dualflow.kernels.numba.kernel_requests import sum_layout

# Broadcast rows shorter than this (after merging axes) go to the blocked evaluator: the numba
# kernel's per-row cost dominates them. ((x - mu) ** 2).sum() on float32 x (N, D), mu (1, D),
# ms: D=3, N=400K: numba 3.4, blocked 1.4, eager 2.0; D=100, N=10K: numba 0.49, blocked 0.68,
# eager 0.46; D=4000, N=1K: numba 0.56, eager 2.3.
MIN_ROW = 64


def cpu_sum_kernel(
    expr: tuple,
    args: tuple[str, ...],
    in_metas: tuple[tuple[tuple[int, ...], str], ...],
    keepdims: bool = False,
) -> Callable:
    """The CPU kernel ``f(xp, *arrays, out=None)`` of ``sum(expr)`` over all axes (``keepdims``:
    an output of ones instead of 0-d), chosen and cached like ``fused_elementwise.cpu_kernel``'s.

    Example:
        >>> e = ("call", "multiply", ("var", "a0"), ("var", "a0"))
        >>> k = cpu_sum_kernel(e, ("a0",), (((3,), "int32"),))
        >>> r = k(np, np.arange(3, dtype=np.int32)); r.item(), r.dtype.name, r.shape
        (5, 'int64', ())
    """
    shapes = tuple(tuple(s) for s, _ in in_metas)
    dtypes = tuple(np.dtype(d).name for _, d in in_metas)
    shape = tuple(np.broadcast_shapes(*shapes)) if shapes else ()
    key = ("sum", expr, args, dtypes, shapes, keepdims)
    kernel = kc._CACHE.get(key)
    if kernel is None:
        program = lower_expr(expr, args, dtypes)
        out_shape = (1,) * len(shape) if keepdims else ()
        dims, views = sum_layout(shapes, shape)
        kernel = None
        if len(dims) == 1 or dims[-1] >= MIN_ROW:
            layout = (dims, views, out_shape)
            kernel = kc._numba_or_none(program, shapes, shape, layout, (expr, args, dtypes))
        if kernel is None:
            kernel = blocked_sum_kernel(program, shape, out_shape)
        kc._CACHE[key] = kernel
    return kernel


def blocked_sum_kernel(
    program: Program, shape: tuple[int, ...], out_shape: tuple[int, ...], block: int | None = None
) -> Callable:
    """``f(xp, *arrays, out=None)``: the sum of ``program`` over inputs broadcast to ``shape``,
    as an array of ``out_shape``, chunk by chunk (``block`` elements; the evaluator's by default).

    Each chunk's partial sum has its own slot and the slots are added in order at the end, so
    the result does not depend on how chunks are split over threads.

    Example:
        >>> from dualflow.kernels.expr.typed_program import lower_expr
        >>> p = lower_expr(("call", "exp", ("var", "a0")), ("a0",), ("float32",))
        >>> blocked_sum_kernel(p, (4,), ())(np, np.zeros(4, np.float32)).item()
        4.0
    """
    shape = tuple(shape)
    plan = kc._schedule(program)
    acc, dtype = sum_dtypes(program.dtype)
    size = math.prod(shape)
    inner = math.prod(shape[1:]) if shape else 1

    def run(xp: Any, *arrays: Any, out: Any = None, **_attrs: Any) -> Any:
        arrays = tuple(np.asarray(a) for a in arrays)
        chunk = block or kc.BLOCK  # read now: tests shrink it
        if not shape or all(kc._flat_ok(a, shape) for a in arrays):
            ins = [a.reshape(-1) for a in arrays]
            rows, step, rest = size, max(1, min(chunk, size)), ()
        else:
            ins = [np.broadcast_to(a, shape) for a in arrays]
            rows, step, rest = shape[0], max(1, min(chunk // max(inner, 1), shape[0])), shape[1:]
        starts = range(0, rows, step)
        partial = np.zeros(len(starts), acc)
        parts = threads() if size >= kc.THREAD_MIN and len(starts) > 1 else 1
        chunk_shape = (step, *rest)
        jobs = [
            (plan, program.dtype, ins, partial, range(k, len(starts), parts), starts, chunk_shape)
            for k in range(parts)
        ]
        run_parts([functools.partial(_sum_chunks, *job) for job in jobs])
        if out is None:
            out = np.empty(out_shape, dtype)
        out[...] = partial.sum()  # numpy's pairwise sum over the chunks' partial sums
        return out

    return run


def _sum_chunks(
    plan: tuple,
    dtype: np.dtype,
    ins: list,
    partial: np.ndarray,
    which: range,
    starts: range,
    shape: tuple[int, ...],
) -> None:
    """Evaluate chunks ``which`` (indices into ``starts``) and store each one's sum."""
    temps = kc._temps(plan, shape)
    last = np.empty(shape, dtype)  # the last step's chunk: summed, then overwritten
    step, rows = shape[0], starts.stop
    with np.errstate(all="ignore"):  # as the elementwise evaluator: a fused region stays quiet
        for c in which:
            start = starts[c]
            stop = min(start + step, rows)
            full = stop - start == step
            slots = temps if full else [t[: stop - start] for t in temps]
            target = last if full else last[: stop - start]
            chunk = [a if a.size == 1 else a[start:stop] for a in ins]
            for fn, refs, slot in plan[0]:
                args = [chunk[v] if k == 0 else (v if k == 1 else slots[v]) for k, v in refs]
                fn(*args, out=target if slot == -1 else slots[slot])
            partial[c] = np.add.reduce(target, axis=None, dtype=partial.dtype)
