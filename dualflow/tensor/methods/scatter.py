"""Scatter-style Tensor methods with PyTorch's meanings: ``index_add``, ``scatter_reduce`` and
the in-place ``scatter_``, ``scatter_add_``, ``index_add_``, ``scatter_reduce_``.

All are composites of existing ops, so their gradients and compiled forms come free:
``index_add`` adds ``source`` through ``ops.take_along_axis_grad`` (its gradient to ``source``
is ``index_select`` of the incoming gradient); ``scatter_reduce`` compares ``index`` with every
position of ``dim`` (a mask of ``index.numel() * self.size(dim)`` entries) and reduces the
candidates there, ``self`` included as one more candidate when ``include_self``, so ties of
``amax``/``amin`` share the gradient as in PyTorch. In-place forms follow every in-place method
(``tensor_methods.inplace``): they write leaves and no-grad tensors, and refuse autograd graphs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow import ops
from dualflow.errors import DTypeError, ShapeError, with_location
from dualflow.tensor.methods.inplace import arith, put
from dualflow.tensor.methods.size import dim_index

REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _leading(x: Any, shape: tuple[int, ...]) -> Any:
    """The leading block of ``x`` of ``shape`` (``x`` itself when it already has it)."""
    if tuple(x.shape) == tuple(shape):
        return x
    return ops.getitem(x, tuple(slice(0, n) for n in shape))


def _src(x: Any, src: Any, ishape: tuple[int, ...], op: str) -> Any:
    """``src`` as a tensor of ``x``'s dtype cut to the index's shape (a number fills it)."""
    if not hasattr(src, "shape") or not len(src.shape):
        return ops.full(ishape, src, x.dtype, x.device)
    if len(src.shape) != len(ishape) or any(s < i for s, i in zip(src.shape, ishape)):
        raise ShapeError(
            with_location(
                f"{op}: src of shape {tuple(src.shape)} must have the index's rank and be at "
                f"least as large as the index {ishape} on every dimension"
            )
        )
    if src.dtype != x.dtype:
        raise DTypeError(
            with_location(f"{op}: self ({x.dtype}) and src ({src.dtype}) must have the same dtype")
        )
    return _leading(src, ishape)


def _check_index(x: Any, index: Any, d: int, op: str) -> tuple[int, ...]:
    shape, ishape = tuple(x.shape), tuple(index.shape)
    if getattr(index.dtype, "kind", "") not in "iu":
        raise DTypeError(with_location(f"{op}: index must be an integer tensor, got {index.dtype}"))
    ok = len(ishape) == len(shape) and all(
        ishape[k] <= shape[k] for k in range(len(shape)) if k != d
    )
    if not ok:
        raise ShapeError(
            with_location(
                f"{op}: index of shape {ishape} must have the rank of the input {shape} and "
                f"sizes no larger than it on every dimension but {d}"
            )
        )
    return ishape


def _lowest(dtype: Any, high: bool) -> Any:
    """The identity of max (``high=False``) or min over ``dtype``."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.inf if high else -np.inf
    info = np.iinfo(dtype) if dtype.kind in "iu" else None
    if info is None:
        return high
    return info.max if high else info.min


def _combine(values: Any, hit: Any, reduce: str, d: int) -> Any:
    """Reduce the candidate ``values`` where ``hit`` along axis ``d``; also the hit counts."""
    dtype = values.dtype
    count = ops.sum(ops.cast(hit, np.int64), d)
    if reduce == "prod":
        return ops.prod(ops.where(hit, values, ops.ones((), dtype)), d), count
    if reduce in ("amax", "amin"):
        fill = ops.full((), _lowest(dtype, reduce == "amin"), dtype)
        picked = ops.where(hit, values, fill)
        return (ops.max if reduce == "amax" else ops.min)(picked, d), count
    total = ops.sum(ops.where(hit, values, ops.zeros((), dtype)), d)
    if reduce == "sum":
        return ops.cast(total, dtype), count
    safe = ops.maximum(count, 1)
    if np.dtype(dtype).kind == "f":
        return total / ops.cast(safe, dtype), count
    quotient = ops.cast(total / safe, dtype)  # truncates; PyTorch floors integer means
    return quotient - ops.cast(ops.greater(quotient * safe, total), dtype), count


def scatter_reduced(
    x: Any, d: int, index: Any, src: Any, reduce: str, include_self: bool, op: str
) -> Any:
    """``x`` with ``src`` reduced into it at ``index`` along ``d`` (see ``scatter_reduce``)."""
    if reduce not in REDUCTIONS:
        raise ValueError(with_location(f"{op}: reduce must be one of {REDUCTIONS}, got {reduce!r}"))
    ishape = _check_index(x, index, d, op)
    src = _src(x, src, ishape, op)
    n, ndim = x.shape[d], x.ndim
    block = tuple(n if k == d else ishape[k] for k in range(ndim))
    positions = ops.reshape(
        ops.arange(n, device=x.device), (1,) * (d + 1) + (n,) + (1,) * (ndim - d - 1)
    )
    # zeros read at index: take_along_axis checks every index lies in [0, n) (the mask below
    # would silently drop an out-of-range one), in the graph too since the sum uses it
    index = index + ops.take_along_axis(ops.zeros(block, index.dtype, x.device), index, d)
    hit = ops.equal(ops.expand_dims(index, d + 1), positions)  # ishape[:d+1], n, ishape[d+1:]
    values = ops.broadcast_to(ops.expand_dims(src, d + 1), tuple(hit.shape))
    base = _leading(x, block)
    if include_self:  # self is one more candidate at every position
        mine = ops.expand_dims(base, d)
        hit = ops.concat([hit, ops.full(tuple(mine.shape), True, np.bool_, x.device)], axis=d)
        values = ops.concat([values, mine], axis=d)
    reduced, count = _combine(values, hit, reduce, d)
    out = ops.where(ops.greater(count, 0), reduced, base)
    if block == tuple(x.shape):
        return out
    return put(x, tuple(slice(0, m) for m in block), out)


class ScatterMethods:
    """``index_add``, ``scatter_reduce`` and the in-place scatter methods."""

    __slots__ = ()

    def index_add(self, dim: int, index: Any, source: Any, *, alpha: Any = 1) -> Any:
        """A copy with ``alpha * source`` added at the 1-D ``index`` along ``dim``; repeats
        accumulate.

        Example:
            >>> import dualflow
            >>> x, i = dualflow.ops.zeros((3, 2)), dualflow.tensor([0, 2, 0])
            >>> x.index_add(0, i, dualflow.ops.ones((3, 2))).tolist()
            [[2.0, 2.0], [0.0, 0.0], [1.0, 1.0]]
        """
        d = dim_index(dim, self.ndim, "index_add")
        index = ops.reshape(index, (-1,)) if len(getattr(index, "shape", ())) == 0 else index
        want = tuple(self.shape[:d]) + (index.shape[0],) + tuple(self.shape[d + 1 :])
        if len(index.shape) != 1 or tuple(source.shape) != want:
            raise ShapeError(
                with_location(
                    f"index_add: source of shape {tuple(source.shape)} must be {want} for an "
                    f"input {tuple(self.shape)} and a 1-D index of shape {tuple(index.shape)}"
                )
            )
        if source.dtype != self.dtype:
            raise DTypeError(
                with_location(
                    f"index_add: self ({self.dtype}) and source ({source.dtype}) must have the "
                    "same dtype"
                )
            )
        spread = ops.reshape(index, (1,) * d + (-1,) + (1,) * (self.ndim - d - 1))
        spread = ops.broadcast_to(spread, want)
        added = ops.take_along_axis_grad(source, spread, tuple(self.shape), d)
        return self + (added if alpha == 1 else ops.cast(added * alpha, self.dtype))

    def scatter_reduce(
        self, dim: int, index: Any, src: Any, reduce: str, *, include_self: bool = True
    ) -> Any:
        """A copy with ``src`` reduced into it at ``index`` along ``dim`` by ``reduce``
        (``"sum"``, ``"prod"``, ``"mean"``, ``"amax"``, ``"amin"``), ``self``'s entries taking
        part unless ``include_self=False`` (then they stay only where nothing is scattered).

        Example:
            >>> import dualflow
            >>> x, i = dualflow.tensor([1.0, 9.0]), dualflow.tensor([0, 0, 1])
            >>> src = dualflow.tensor([4.0, 2.0, 3.0])
            >>> x.scatter_reduce(0, i, src, "amax").tolist()
            [4.0, 9.0]
            >>> x.scatter_reduce(0, i, src, "mean", include_self=False).tolist()
            [3.0, 3.0]
        """
        d = dim_index(dim, self.ndim, "scatter_reduce")
        return scatter_reduced(self, d, index, src, reduce, include_self, "scatter_reduce")

    def scatter_(
        self, dim: int, index: Any, src: Any = None, *, value: Any = None, reduce: Any = None
    ) -> Any:
        """``scatter`` in place (``reduce="add"``/``"multiply"``: PyTorch's legacy reductions).

        Example:
            >>> import dualflow
            >>> x = dualflow.ops.zeros(3)
            >>> x.scatter_(0, dualflow.tensor([2]), 5.0).tolist()
            [0.0, 0.0, 5.0]
        """
        src = value if src is None else src
        if reduce is None:
            return arith(self, "scatter_", lambda: self.scatter(dim, index, src), src)
        kinds = {"add": "sum", "multiply": "prod"}
        if reduce not in kinds:
            raise ValueError(
                with_location(f"scatter_: reduce must be 'add' or 'multiply', got {reduce!r}")
            )
        return self.scatter_reduce_(dim, index, src, kinds[reduce])

    def scatter_add_(self, dim: int, index: Any, src: Any) -> Any:
        """``scatter_add`` in place.

        Example:
            >>> import dualflow
            >>> x = dualflow.ops.zeros(2)
            >>> x.scatter_add_(0, dualflow.tensor([1, 1]), dualflow.tensor([1.0, 2.0])).tolist()
            [0.0, 3.0]
        """
        return arith(self, "scatter_add_", lambda: self.scatter_add(dim, index, src), src)

    def index_add_(self, dim: int, index: Any, source: Any, *, alpha: Any = 1) -> Any:
        """``index_add`` in place.

        Example:
            >>> import dualflow
            >>> x = dualflow.ops.zeros(2)
            >>> x.index_add_(0, dualflow.tensor([1]), dualflow.tensor([4.0]), alpha=2).tolist()
            [0.0, 8.0]
        """
        compute = lambda: self.index_add(dim, index, source, alpha=alpha)  # noqa: E731
        return arith(self, "index_add_", compute, source)

    def scatter_reduce_(
        self, dim: int, index: Any, src: Any, reduce: str, *, include_self: bool = True
    ) -> Any:
        """``scatter_reduce`` in place.

        Example:
            >>> import dualflow
            >>> x, src = dualflow.tensor([2.0, 3.0]), dualflow.tensor([4.0, 5.0])
            >>> x.scatter_reduce_(0, dualflow.tensor([0, 0]), src, "prod").tolist()
            [40.0, 3.0]
        """
        compute = lambda: self.scatter_reduce(dim, index, src, reduce, include_self=include_self)  # noqa: E731
        return arith(self, "scatter_reduce_", compute, src)
