"""vmap's batching rules for elementwise, matmul, reduction, softmax and loss ops, attached to
each ``OpDef`` as its ``batch`` fact when ``dualflow.func`` is imported.

A rule gets the op's *physical* inputs, where input ``i`` carries the batch at dimension
``dims[i]`` (None: unbatched, shared by every example), and returns ``(result, out_dims)``;
its ops run on the levels below vmap's (eager, the tracer, an outer vmap). Most rules move the
batch dimension to the front (``front``) and shift the op's axes by one. The shape and
indexing rules are in ``batch_rules_shape``, the convolution, pooling, batch-norm and
embedding ones in ``batch_rules_spatial``; ``batch_table`` says which op has which rule and
lists, with a reason, the ops left to the per-example loop (``batching.loop_fallback``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dualflow.ops.dispatch import apply
from dualflow.ops.registry import OPS, OpDef
from dualflow.tensor.core import Tensor

Rule = Callable[[OpDef, tuple, tuple, dict, int], tuple]


def front(x: Tensor, d: int | None) -> Tensor:
    """``x`` with its batch dimension ``d`` moved to 0 (unchanged when it is already).

    Example:
        >>> import dualflow
        >>> front(dualflow.zeros(2, 3, 4), 2).shape
        (4, 2, 3)
    """
    if not d:
        return x
    axes = (d, *(i for i in range(x.ndim) if i != d))
    return apply(OPS["transpose"], x, axes=axes)


def logical_ndim(x: Any, d: int | None) -> int:
    """One example's rank of a physical input."""
    ndim = getattr(x, "ndim", 0)
    return ndim if d is None else ndim - 1


def batched(x: Tensor, d: int | None, size: int) -> Tensor:
    """``x`` batched at 0: an unbatched input broadcast to every example."""
    if d is not None:
        return front(x, d)
    return apply(OPS["broadcast_to"], x, shape=(size, *x.shape))


def pad_rank(x: Tensor, rank: int) -> Tensor:
    """A front-batched ``x`` with ones inserted after the batch up to ``rank`` logical dims.

    Example:
        >>> import dualflow
        >>> pad_rank(dualflow.zeros(5, 3), 3).shape
        (5, 1, 1, 3)
    """
    missing = rank - (x.ndim - 1)
    if missing <= 0:
        return x
    return apply(OPS["reshape"], x, shape=(x.shape[0], *(1,) * missing, *x.shape[1:]))


def shift_axes(axis: Any, ndim: int) -> Any:
    """Logical reduction axes (None, an int or a tuple) as physical ones, batch at 0.

    Example:
        >>> shift_axes(None, 2), shift_axes(-1, 2), shift_axes((0, 1), 3)
        ((1, 2), 2, (1, 2))
    """
    if axis is None:
        return tuple(range(1, ndim + 1))
    if isinstance(axis, int):
        return axis % max(ndim, 1) + 1
    return tuple(a % max(ndim, 1) + 1 for a in axis)


def elementwise(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    """Batched operands to the front with ones up to the widest rank; the unbatched ones
    broadcast from the right as they would per example."""
    rank = max(logical_ndim(a, d) for a, d in zip(args, dims))
    new = [a if d is None else pad_rank(front(a, d), rank) for a, d in zip(args, dims)]
    return apply(op, *new, **attrs), 0


def same_dim(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    """An op of one input that acts per element whatever the layout (copy, full_like...)."""
    return apply(op, *args, **attrs), dims[0]


def reduction(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    """sum, prod, max, min: the axes shifted past the front batch dimension."""
    x = front(args[0], dims[0])
    axis = shift_axes(attrs["axis"], x.ndim - 1)
    return apply(op, x, **{**attrs, "axis": axis}), 0


def arg_reduction(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    """argmax/argmin: over all axes, flatten each example first (the index is into it)."""
    x = front(args[0], dims[0])
    if attrs["axis"] is None:
        flat = apply(OPS["reshape"], x, shape=(x.shape[0], -1))
        out = apply(op, flat, axis=1, keepdims=False)
        if attrs["keepdims"]:
            out = apply(OPS["reshape"], out, shape=(x.shape[0], *(1,) * (x.ndim - 1)))
        return out, 0
    return apply(op, x, **{**attrs, "axis": shift_axes(attrs["axis"], x.ndim - 1)}), 0


def along_axis(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    """softmax, log_softmax, argsort, flip: per-example axes shifted past the batch."""
    x = front(args[0], dims[0])
    key = "axes" if "axes" in attrs else "axis"
    return apply(op, x, **{**attrs, key: shift_axes(attrs[key], x.ndim - 1)}), 0


def cumulative(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    """cumsum, cumprod, logcumsumexp, cummax, cummin: the axis shifted past the batch; 0-d
    examples are scanned as the one-element rows of a (batch, 1) stack."""
    x = front(args[0], dims[0])
    if x.ndim > 1:
        result = apply(op, x, **{**attrs, "axis": shift_axes(attrs["axis"], x.ndim - 1)})
        return result, ((0,) * len(result) if isinstance(result, tuple) else 0)
    column = apply(OPS["reshape"], x, shape=(size, 1))
    result = apply(op, column, **{**attrs, "axis": 1})
    if isinstance(result, tuple):
        return tuple(apply(OPS["reshape"], r, shape=(size,)) for r in result), (0,) * len(result)
    return apply(OPS["reshape"], result, shape=(size,)), 0


def matmul(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    """numpy's matmul per example: 1-d operands as a row / a column (squeezed afterwards),
    batched ones in front with ones up to the widest stack rank."""
    (a, b), (da, db) = args, dims
    if db is None and b.ndim <= 2:  # a batch of rows (or stacks) times one matrix
        a = front(a, da)
        if b.ndim == 2 and a.ndim > 2:  # one GEMM over every example's rows
            rows = apply(OPS["reshape"], a, shape=(-1, a.shape[-1]))
            out = apply(op, rows, b)
            return apply(OPS["reshape"], out, shape=(*a.shape[:-1], b.shape[-1])), 0
        return apply(op, a, b), 0
    if da is None and a.ndim <= 2 and logical_ndim(b, db) >= 2:
        return apply(op, a, front(b, db)), 0
    vec_a, vec_b = logical_ndim(a, da) == 1, logical_ndim(b, db) == 1
    a, b = _as_matrix(a, da, row=True), _as_matrix(b, db, row=False)
    rank = max(logical_ndim(a, da), logical_ndim(b, db))
    a = a if da is None else pad_rank(a, rank)
    b = b if db is None else pad_rank(b, rank)
    # a contraction of 1 (outer products: a weight's per-example gradient) is one product per
    # element: a broadcast multiply gives the same bits, a stacked matmul is far slower
    out = apply(OPS["multiply"] if a.shape[-1] == 1 else op, a, b)
    if vec_a or vec_b:
        tail = [n for n, vec in zip(out.shape[-2:], (vec_a, vec_b)) if not vec]
        out = apply(OPS["reshape"], out, shape=(*out.shape[:-2], *tail))
    return out, 0


def _as_matrix(x: Tensor, d: int | None, row: bool) -> Tensor:
    """A 1-d example as a (1, k) row or a (k, 1) column; a batched one in front."""
    x = x if d is None else front(x, d)
    if logical_ndim(x, d) != 1:
        return x
    shape = (*x.shape[:-1], 1, x.shape[-1]) if row else (*x.shape, 1)
    return apply(OPS["reshape"], x, shape=shape)


def softmax_cross_entropy(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    """The (N, C, ...) logits of every example as one (B*N, C, ...) batch, unreduced; then
    each example's sum, or mean over its non-ignored labels."""
    x, t = batched(args[0], dims[0], size), batched(args[1], dims[1], size)
    n = x.shape[1]
    flat = apply(OPS["reshape"], x, shape=(size * n, *x.shape[2:]))
    labels = apply(OPS["reshape"], t, shape=(size * n, *t.shape[2:]))
    loss = apply(op, flat, labels, **{**attrs, "reduce": "no"})
    loss = apply(OPS["reshape"], loss, shape=t.shape)
    if attrs["reduce"] == "no":
        return loss, 0
    axes = tuple(range(1, t.ndim))
    total = apply(OPS["sum"], loss, axis=axes, keepdims=False)
    if attrs["reduce"] == "mean":
        valid = apply(OPS["not_equal"], t, attrs["ignore_label"])
        count = apply(OPS["cast"], valid, dtype=str(x.dtype))
        total = apply(OPS["divide"], total, apply(OPS["sum"], count, axis=axes, keepdims=False))
    return total, 0


def softmax_cross_entropy_grad(
    op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int
) -> tuple:
    """As softmax_cross_entropy: one (B*N, C, ...) batch, reduce='no', with each label's
    gradient given (its example's gy, over that example's count for 'mean')."""
    x, t = batched(args[0], dims[0], size), batched(args[1], dims[1], size)
    gy = batched(args[2], dims[2], size)
    if attrs["reduce"] != "no":  # gy is (B,): one weight per example, spread over its labels
        if attrs["reduce"] == "mean":
            valid = apply(OPS["not_equal"], t, attrs["ignore_label"])
            count = apply(OPS["cast"], valid, dtype=str(x.dtype))
            count = apply(OPS["sum"], count, axis=tuple(range(1, t.ndim)), keepdims=False)
            gy = apply(OPS["divide"], gy, apply(OPS["maximum"], count, 1.0))
        gy = apply(OPS["reshape"], gy, shape=(size,) + (1,) * (t.ndim - 1))
        gy = apply(OPS["broadcast_to"], gy, shape=t.shape)
    rows = size * x.shape[1]
    flat = [apply(OPS["reshape"], a, shape=(rows, *a.shape[2:])) for a in (x, t, gy)]
    gx = apply(op, *flat, **{**attrs, "reduce": "no"})
    return apply(OPS["reshape"], gx, shape=x.shape), 0


def allreduce(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    """A collective reduces elementwise across ranks: the whole batch in one call."""
    return apply(op, *args, **attrs), dims[-1]


def allreduce_start(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    """A split collective's start: one handle for the whole batch (``allreduce`` waits)."""
    return apply(op, *args, **attrs), None
