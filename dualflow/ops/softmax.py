"""Softmax and log-softmax along one axis: numerically stable primitives.

Both subtract the maximum before exponentiating, so huge logits neither overflow nor lose the
result; their backward passes reuse the saved output and are written with ops (double backward).
Over the last axis of a numpy float32/float64 array, in any memory layout (the bits never depend
on it), both run one numba pass a row (``kernels/loss/softmax_rows``: eager and compiled alike,
rows split over the kernel threads); other numpy dtypes take the numpy form, softmax's split by
rows (``_split_rows``): each row's max, exp and sum are its own, so the bits do not change.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from dualflow.errors import ShapeError
from dualflow.kernels.base.cpu_threads import parts_for, run_parts, split
from dualflow.kernels.base.machine_constants import machine_constants
from dualflow.kernels.loss import softmax_rows
from dualflow.ops.arithmetic import exp
from dualflow.ops.dispatch import apply
from dualflow.ops.reduction import sum as reduce_sum
from dualflow.ops.registry import Meta, primitive
from dualflow.ops.validate import require_float


def _softmax_infer(op: str, x: Meta, axis: int) -> tuple[Meta]:
    ndim = len(x.shape)
    if ndim == 0:
        raise ShapeError(f"{op}: input must be at least 1-D, got a scalar")
    if not -ndim <= axis < ndim:
        raise ShapeError(f"{op}: axis {axis} is out of range for input shape {tuple(x.shape)}")
    return (Meta(tuple(x.shape), require_float(op, x)),)


@primitive("softmax", saves=("y",), autocast="float32_cuda", layout="elementwise", aliasing="fresh")
class Softmax:
    """``exp(x) / sum(exp(x))`` along ``axis``."""

    def infer(x: Meta, *, axis: int) -> tuple[Meta]:
        return _softmax_infer("softmax", x, axis)

    def forward(xp, x, *, axis):
        if _last_axis_rows(xp, x, axis):
            return softmax_rows.rows("softmax", x)
        if xp is np and axis in (-1, x.ndim - 1) and x.ndim > 1 and x.flags.c_contiguous:
            parts = parts_for(x.size, PART_MIN or machine_constants().softmax_part_min)
            if parts > 1:
                return _split_rows(x, parts)
        e = x - x.max(axis=axis, keepdims=True)
        xp.exp(e, out=e)
        e /= e.sum(axis=axis, keepdims=True)
        return e

    def backward(ctx, gy):
        y = ctx.y
        return y * (gy - reduce_sum(gy * y, ctx.attrs["axis"], keepdims=True))


def _last_axis_rows(xp: Any, x: Any, axis: int) -> bool:
    """Whether the row kernels (``kernels/loss/softmax_rows``) take this call: the last axis
    of a numpy float32/float64 array of 2+ dims, whatever its memory layout."""
    return xp is np and axis in (-1, x.ndim - 1) and softmax_rows.covers(x)


# the numpy form's split (other dtypes: float16): elements a part must have. None takes the
# machine's (``machine_constants``: four hand-offs of one-thread time of the numpy form; the
# default 2^16 was one machine's); an int here (tests) overrides it
PART_MIN: int | None = None


def _rows_softmax(x: np.ndarray, out: np.ndarray) -> None:
    # Softmax.forward's own steps, into ``out``
    np.subtract(x, x.max(axis=-1, keepdims=True), out=out)
    np.exp(out, out=out)
    out /= out.sum(axis=-1, keepdims=True)


def _split_rows(x: np.ndarray, parts: int) -> np.ndarray:
    """Softmax over the last axis of C-ordered ``x`` in ``parts`` row ranges at once.

    Example:
        >>> x = np.arange(6.0).reshape(3, 2)
        >>> bool(np.array_equal(_split_rows(x, 2), Softmax.forward(np, x, axis=-1)))
        True
    """
    out = np.empty_like(x)
    rows, into = x.reshape(-1, x.shape[-1]), out.reshape(-1, x.shape[-1])
    spans = split(rows.shape[0], parts)
    run_parts([functools.partial(_rows_softmax, rows[i:j], into[i:j]) for i, j in spans])
    return out


@primitive(
    "log_softmax", saves=("y",), autocast="float32_cuda", layout="elementwise", aliasing="fresh"
)
class LogSoftmax:
    """``x - logsumexp(x)`` along ``axis``."""

    def infer(x: Meta, *, axis: int) -> tuple[Meta]:
        return _softmax_infer("log_softmax", x, axis)

    def forward(xp, x, *, axis):
        if _last_axis_rows(xp, x, axis):
            return softmax_rows.rows("log_softmax", x)
        z = x - x.max(axis=axis, keepdims=True)
        z -= xp.log(xp.exp(z).sum(axis=axis, keepdims=True))
        return z

    def backward(ctx, gy):
        return gy - exp(ctx.y) * reduce_sum(gy, ctx.attrs["axis"], keepdims=True)


def softmax(x: Any, axis: int = -1) -> Any:
    """Softmax along ``axis`` (stable for large inputs).

    Example:
        >>> from dualflow import ops
        >>> [round(v, 4) for v in ops.softmax([0.0, 1e4, 1e4]).tolist()]
        [0.0, 0.5, 0.5]
    """
    return apply(Softmax, x, axis=int(axis))


def log_softmax(x: Any, axis: int = -1) -> Any:
    """Logarithm of the softmax along ``axis`` (stable: no ``log(0)`` for large inputs).

    Example:
        >>> from dualflow import ops
        >>> [round(v, 4) for v in ops.log_softmax([0.0, 0.0]).tolist()]
        [-0.6931, -0.6931]
    """
    return apply(LogSoftmax, x, axis=int(axis))
