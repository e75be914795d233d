"""Reductions: sum, prod, max, min, argmax, argmin (primitives); mean, var, std, logsumexp
(composites).

``max``/``min`` send the gradient to the extreme elements; ties share it equally (as in numpy-based
Chainer), so the gradient of ``max`` of a constant array is uniform.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from dualflow._config import config
from dualflow.errors import DTypeError, NumericalError, user_frame, with_location
from dualflow.ops.arithmetic import abs, cast, equal, exp, log, sqrt, where
from dualflow.ops.axes import canonical_axis, normalize_axes, reduced_shape
from dualflow.ops.dispatch import apply
from dualflow.ops.registry import Meta, primitive
from dualflow.ops.shape import broadcast_to, reshape


def _reduce_infer(name: str, x: Meta, axis: Any, keepdims: bool) -> tuple[Meta]:
    axes = normalize_axes(name, axis, len(x.shape))
    return (Meta(reduced_shape(tuple(x.shape), axes, keepdims), np.dtype(x.dtype)),)


def _expand_back(ctx: Any, gy: Any) -> Any:
    """Reshape a reduced gradient to keepdims form so it broadcasts against the input."""
    shape = ctx.in_shapes[0]
    axes = normalize_axes("sum", ctx.attrs["axis"], len(shape))
    return reshape(gy, reduced_shape(shape, axes, True))


@primitive(
    "sum",
    saves=(),
    check_eager=False,
    aliasing="fresh",
    layout="operands",
    autocast="float32_cuda",
)
class Sum:
    """Sum over ``axis`` (all axes when None)."""

    def infer(x: Meta, *, axis: Any, keepdims: bool) -> tuple[Meta]:
        (out,) = _reduce_infer("sum", x, axis, keepdims)
        return (Meta(out.shape, np.sum(np.ones(1, dtype=out.dtype)).dtype),)  # numpy's promotion

    def forward(xp, x, *, axis, keepdims):
        if type(x) is np.ndarray:  # np.add.reduce as np.sum calls it, without its ~2 us wrapper
            return x.sum(axis=axis, keepdims=keepdims)
        return xp.sum(x, axis=axis, keepdims=keepdims)

    def backward(ctx, gy):
        # a full reduction's 0-d gradient broadcasts as it is: one reshape call less (~2.5 us)
        return broadcast_to(gy if gy.ndim == 0 else _expand_back(ctx, gy), ctx.in_shapes[0])


@primitive("prod", saves=("x0", "y"), autocast="float32", aliasing="fresh")
class Prod:
    """Product over ``axis`` (all axes when None); exact gradients where one factor is zero."""

    def infer(x: Meta, *, axis: Any, keepdims: bool) -> tuple[Meta]:
        (out,) = _reduce_infer("prod", x, axis, keepdims)
        return (Meta(out.shape, np.prod(np.ones(1, dtype=out.dtype)).dtype),)

    def forward(xp, x, *, axis, keepdims):
        return xp.prod(x, axis=axis, keepdims=keepdims)

    def backward(ctx, gy):
        # d y / d x_i is the product of the other factors: y / x_i where x_i != 0; at the single
        # zero of a slice, the product of the non-zero factors; 0 where a slice has two zeros.
        x, axis = ctx.x0, ctx.attrs["axis"]
        zero = equal(x, 0)
        safe = where(zero, 1, x)
        zeros = apply(Sum, cast(zero, x.dtype), axis=axis, keepdims=True)
        others = apply(Prod, safe, axis=axis, keepdims=True)
        grad = where(zero, where(equal(zeros, 1), others, 0), _expand_back(ctx, ctx.y) / safe)
        return _expand_back(ctx, gy) * grad


def _extreme_backward(ctx: Any, gy: Any) -> Any:
    x, y = ctx.x0, ctx.y
    mask = cast(equal(x, _expand_back(ctx, y)), x.dtype)
    count = apply(Sum, mask, axis=ctx.attrs["axis"], keepdims=True)
    return _expand_back(ctx, gy) * mask / count


@primitive("max", saves=("x0", "y"), aliasing="fresh", layout="operands")
class Max:
    """Maximum over ``axis``; ties share the gradient equally."""

    def infer(x: Meta, *, axis: Any, keepdims: bool) -> tuple[Meta]:
        if 0 in x.shape:
            raise DTypeError("max: zero-size input has no maximum")
        return _reduce_infer("max", x, axis, keepdims)

    def forward(xp, x, *, axis, keepdims):
        return xp.max(x, axis=axis, keepdims=keepdims)

    backward = _extreme_backward


@primitive("min", saves=("x0", "y"), aliasing="fresh", layout="operands")
class Min:
    """Minimum over ``axis``; ties share the gradient equally."""

    def infer(x: Meta, *, axis: Any, keepdims: bool) -> tuple[Meta]:
        if 0 in x.shape:
            raise DTypeError("min: zero-size input has no minimum")
        return _reduce_infer("min", x, axis, keepdims)

    def forward(xp, x, *, axis, keepdims):
        return xp.min(x, axis=axis, keepdims=keepdims)

    backward = _extreme_backward


def _arg_infer(name: str, x: Meta, axis: int | None, keepdims: bool) -> tuple[Meta]:
    (out,) = _reduce_infer(name, x, axis, keepdims)
    return (Meta(out.shape, np.dtype(np.int64)),)


@primitive("argmax", aliasing="fresh", layout="operands")
class Argmax:
    """Index of the maximum along ``axis`` (flattened when None); no gradient."""

    def infer(x: Meta, *, axis: int | None, keepdims: bool) -> tuple[Meta]:
        return _arg_infer("argmax", x, axis, keepdims)

    def forward(xp, x, *, axis, keepdims):
        return xp.argmax(x, axis=axis, keepdims=keepdims).astype(np.int64)


@primitive("argmin", aliasing="fresh", layout="operands")
class Argmin:
    """Index of the minimum along ``axis`` (flattened when None); no gradient."""

    def infer(x: Meta, *, axis: int | None, keepdims: bool) -> tuple[Meta]:
        return _arg_infer("argmin", x, axis, keepdims)

    def forward(xp, x, *, axis, keepdims):
        return xp.argmin(x, axis=axis, keepdims=keepdims).astype(np.int64)


def sum(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """Sum of elements over ``axis``.

    Example:
        >>> from dualflow import ops
        >>> ops.sum([[1.0, 2.0], [3.0, 4.0]], axis=0).tolist()
        [4.0, 6.0]
    """
    return apply(Sum, x, axis=canonical_axis(axis), keepdims=bool(keepdims))


def prod(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """Product of elements over ``axis``.

    Example:
        >>> from dualflow import ops
        >>> ops.prod([[1.0, 2.0], [3.0, 4.0]], axis=1).tolist()
        [2.0, 12.0]
    """
    return apply(Prod, x, axis=canonical_axis(axis), keepdims=bool(keepdims))


def max(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """Maximum over ``axis``.

    Example:
        >>> from dualflow import ops
        >>> ops.max([[1.0, 5.0], [3.0, 4.0]], axis=1).tolist()
        [5.0, 4.0]
    """
    return apply(Max, x, axis=canonical_axis(axis), keepdims=bool(keepdims))


def min(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """Minimum over ``axis``.

    Example:
        >>> from dualflow import ops
        >>> ops.min([[1.0, 5.0], [3.0, 4.0]], axis=1).tolist()
        [1.0, 3.0]
    """
    return apply(Min, x, axis=canonical_axis(axis), keepdims=bool(keepdims))


def argmax(x: Any, axis: int | None = None, keepdims: bool = False) -> Any:
    """Indices of the maxima along ``axis``.

    Example:
        >>> from dualflow import ops
        >>> ops.argmax([[1.0, 5.0], [3.0, 2.0]], axis=1).tolist()
        [1, 0]
    """
    return apply(Argmax, x, axis=axis, keepdims=bool(keepdims))


def argmin(x: Any, axis: int | None = None, keepdims: bool = False) -> Any:
    """Indices of the minima along ``axis``.

    Example:
        >>> from dualflow import ops
        >>> ops.argmin([[1.0, 5.0], [3.0, 2.0]], axis=1).tolist()
        [0, 1]
    """
    return apply(Argmin, x, axis=axis, keepdims=bool(keepdims))


def _count(x: Any, axis: Any) -> int:
    shape = tuple(np.shape(x) if not hasattr(x, "shape") else x.shape)
    # math.prod: sizes may be expressions (a trace with dynamic dimensions), kept as such
    return math.prod(shape[a] for a in normalize_axes("mean", axis, len(shape)))


def inverse_count(op: str, n: int, what: Any) -> float:
    """``1 / n`` for an average over ``n`` elements. For ``n <= 0`` the average is NaN, as in
    numpy and PyTorch (``torch.tensor([]).mean()``): a RuntimeWarning naming ``op`` and the
    user's line, or in debug mode a NumericalError.

    Example:
        >>> inverse_count("mean", 4, "x of shape (4,)")
        0.25
    """
    if n > 0:
        return 1.0 / n
    where = user_frame()
    what = what() if callable(what) else what  # built only here: a shape's text is its value
    message = f"{op}: averaging over {n} elements ({what}) gives NaN"
    if config.debug:
        raise NumericalError(with_location(message, where))
    file, line = where or ("<unknown>", 0)
    warnings.warn_explicit(message, RuntimeWarning, file, line)  # at the user's line
    return float("nan")


def _what(x: Any, axis: Any) -> str:
    return f"x of shape {tuple(np.shape(x) if not hasattr(x, 'shape') else x.shape)}, axis {axis}"


def mean(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """Arithmetic mean over ``axis`` (a sum times ``1/n``); NaN over zero elements, as numpy
    and PyTorch (see :func:`inverse_count`).

    Example:
        >>> from dualflow import ops
        >>> ops.mean([[1.0, 2.0], [3.0, 4.0]], axis=1).tolist()
        [1.5, 3.5]
    """
    return sum(x, axis, keepdims) * inverse_count("mean", _count(x, axis), lambda: _what(x, axis))


def var(x: Any, axis: Any = None, keepdims: bool = False, ddof: int = 0) -> Any:
    """Variance over ``axis`` with ``ddof`` delta degrees of freedom (numpy's default 0).

    Example:
        >>> from dualflow import ops
        >>> ops.var([1.0, 2.0, 3.0, 4.0]).item()
        1.25
    """
    n = _count(x, axis) - ddof
    centered = x - mean(x, axis, keepdims=True)
    return sum(centered * centered, axis, keepdims) * inverse_count(
        "var", n, lambda: _what(x, axis)
    )


def std(x: Any, axis: Any = None, keepdims: bool = False, ddof: int = 0) -> Any:
    """Standard deviation over ``axis``.

    Example:
        >>> from dualflow import ops
        >>> ops.std([1.0, 3.0]).item()
        1.0
    """
    return sqrt(var(x, axis, keepdims, ddof))


def logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """``log(sum(exp(x)))`` over ``axis``, stable for large inputs; as PyTorch, a slice of all
    ``-inf`` gives ``-inf`` and one holding ``+inf`` gives ``+inf`` (gradient NaN at both).

    Example:
        >>> from dualflow import ops
        >>> round(ops.logsumexp([0.0, 0.0]).item(), 4), ops.logsumexp([-np.inf, -np.inf]).item()
        (0.6931, -inf)
    """
    peak = apply(StopGradient, max(x, axis, keepdims=True))
    # an infinite peak would make x - peak NaN: shift by 0 there instead (torch masks it too)
    peak = where(equal(abs(peak), np.inf), 0.0, peak)
    out = log(sum(exp(x - peak), axis, keepdims=True)) + peak
    if keepdims:
        return out
    shape = tuple(np.shape(x) if not hasattr(x, "shape") else x.shape)
    return reshape(out, reduced_shape(shape, normalize_axes("logsumexp", axis, len(shape)), False))


# in a traced graph an identity: gradients are already in the graph (fold drops it)
@primitive("stop_gradient", check_eager=False, aliasing="view", layout="first", passthrough=True)
class StopGradient:
    """Identity whose gradient is zero (``detach`` inside a graph)."""

    def infer(x: Meta) -> tuple[Meta]:
        return (Meta(tuple(x.shape), x.dtype),)

    def forward(xp, x):
        return x


def stop_gradient(x: Any) -> Any:
    """The same values, but no gradient flows back through them.

    Example:
        >>> from dualflow import ops
        >>> ops.stop_gradient([1.0]).tolist()
        [1.0]
    """
    return apply(StopGradient, x)
