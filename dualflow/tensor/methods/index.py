"""Index methods with PyTorch's meanings: gather, scatter, scatter_add, index_select, masked_fill,
where, masked_select, triu/tril, sort and topk (gathers along a dim through
``ops.take_along_axis``).

``scatter`` writes ``src`` at ``index``; where an index repeats along the dim, PyTorch keeps one
of the values (unspecified which) and dualflow writes their mean (the same when they are equal).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow import ops
from dualflow.errors import ShapeError, with_location
from dualflow.symbolic_shapes import SymInt
from dualflow.tensor.methods.reduce import ValuesIndices
from dualflow.tensor.methods.size import dim_index


def _index_shape(x: Any, index: Any, dim: int, op: str) -> tuple[int, ...]:
    shape, ishape = tuple(x.shape), tuple(index.shape)
    ok = len(ishape) == len(shape) and all(
        ishape[d] <= shape[d] for d in range(len(shape)) if d != dim
    )
    if not ok:
        raise ShapeError(
            with_location(
                f"{op}: index of shape {ishape} must have the rank of the input {shape} and "
                f"sizes no larger than it on every dimension but {dim}"
            )
        )
    return ishape


def _block(x: Any, shape: tuple[int, ...], dim: int) -> Any:
    """The leading block of ``x`` with ``shape`` on every dim but ``dim`` (itself if equal)."""
    index = tuple(slice(None) if d == dim else slice(0, n) for d, n in enumerate(shape))
    same = all(d == dim or n == x.shape[d] for d, n in enumerate(shape))
    return x if same else ops.getitem(x, index)


def _scattered(shape: tuple, index: Any, src: Any, dim: int) -> Any:
    """Zeros of ``shape`` plus ``src`` added at ``index`` along ``dim`` (index may be smaller)."""
    block = tuple(n if d == dim else index.shape[d] for d, n in enumerate(shape))
    out = ops.take_along_axis_grad(src, index, block, dim)
    if block == tuple(shape):
        return out
    return ops.pad(out, tuple((0, full - part) for full, part in zip(shape, block)))


class IndexMethods:
    """Tensor gather/scatter/select methods and sorting."""

    __slots__ = ()

    def gather(self, dim: int, index: Any) -> Any:
        """``out[i][j] = self[i][index[i][j]]`` for ``dim=1`` (any rank): PyTorch's gather.

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([[1.0, 2.0], [3.0, 4.0]])
            >>> x.gather(1, dualflow.tensor([[0, 0], [1, 0]])).tolist()
            [[1.0, 1.0], [4.0, 3.0]]
        """
        d = dim_index(dim, self.ndim, "gather")
        shape = _index_shape(self, index, d, "gather")
        return ops.take_along_axis(_block(self, shape, d), index, d)

    def scatter_add(self, dim: int, index: Any, src: Any) -> Any:
        """A copy with ``src`` added at ``index`` along ``dim`` (repeats accumulate).

        Example:
            >>> import dualflow
            >>> z, i = dualflow.ops.zeros(3), dualflow.tensor([0, 0, 2])
            >>> z.scatter_add(0, i, dualflow.tensor([1.0, 2.0, 5.0])).tolist()
            [3.0, 0.0, 5.0]
        """
        d = dim_index(dim, self.ndim, "scatter_add")
        shape = _index_shape(self, index, d, "scatter_add")
        return self + _scattered(tuple(self.shape), index, _block(src, shape, -1), d)

    def scatter(self, dim: int, index: Any, src: Any = None, *, value: Any = None) -> Any:
        """A copy with ``src`` (a tensor, or a number ``value``) written at ``index`` along
        ``dim``; e.g. one-hot rows from labels.

        Example:
            >>> import dualflow
            >>> labels = dualflow.tensor([[2], [0]])
            >>> dualflow.ops.zeros((2, 3)).scatter(1, labels, 1.0).tolist()
            [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
        """
        d = dim_index(dim, self.ndim, "scatter")
        shape = _index_shape(self, index, d, "scatter")
        src = value if src is None else src
        if hasattr(src, "shape") and len(src.shape):
            src = ops.cast(_block(src, shape, -1), self.dtype)  # src: cut on every dim
        else:
            src = ops.full(shape, src, self.dtype)
        hit = _scattered(tuple(self.shape), index, ops.ones_like(src), d)
        written = _scattered(tuple(self.shape), index, src, d) / ops.maximum(hit, 1)
        return ops.where(ops.greater(hit, 0), ops.cast(written, self.dtype), self)

    def index_select(self, dim: int, index: Any) -> Any:
        """The entries at the 1-D integer ``index`` along ``dim``.

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([[1.0, 2.0, 3.0]])
            >>> x.index_select(1, dualflow.tensor([2, 0])).tolist()
            [[3.0, 1.0]]
        """
        d = dim_index(dim, self.ndim, "index_select")
        if len(getattr(index, "shape", (0,))) > 1:
            raise ShapeError(with_location("index_select: index must be 0-D or 1-D"))
        return ops.getitem(self, (slice(None),) * d + (index,))

    def masked_fill(self, mask: Any, value: Any) -> Any:
        """A copy with ``value`` where the bool ``mask`` (broadcast) is true.

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([1.0, 2.0])
            >>> x.masked_fill(x > 1.5, float("-inf")).tolist()
            [1.0, -inf]
        """
        if getattr(getattr(mask, "dtype", None), "kind", "b") != "b":
            raise ShapeError(with_location(f"masked_fill: mask must be bool, got {mask.dtype}"))
        if hasattr(value, "shape"):
            value = ops.cast(value, self.dtype)
        out = ops.where(mask, value, self)
        return out if out.dtype == self.dtype else ops.cast(out, self.dtype)

    def where(self, condition: Any, other: Any) -> Any:
        """``self`` where ``condition`` holds, else ``other`` (PyTorch's ``x.where(c, y)``).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0, 2.0]).where(dualflow.tensor([True, False]), 0.0).tolist()
            [1.0, 0.0]
        """
        return ops.where(condition, self, other)

    def masked_select(self, mask: Any) -> Any:
        """The elements where ``mask`` (broadcast) is true, as a 1-D tensor (its length depends
        on the data, so inside a compiled function the call runs eagerly, with a warning).

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([1.0, 2.0, 3.0])
            >>> x.masked_select(x != 2.0).tolist()
            [1.0, 3.0]
        """
        mask = ops.broadcast_to(mask, tuple(self.shape))
        return ops.getitem(ops.broadcast_to(self, tuple(mask.shape)), mask)

    def sort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:
        """``(values, indices)`` sorted along ``dim`` (always stable: ties keep their order).

        Example:
            >>> import dualflow
            >>> values, indices = dualflow.tensor([3.0, 1.0, 2.0]).sort(descending=True)
            >>> values.tolist(), indices.tolist()
            ([3.0, 2.0, 1.0], [0, 2, 1])
        """
        d = dim_index(dim, self.ndim, "sort")
        if self.ndim == 0:
            return ValuesIndices(self, ops.zeros((), "int64"))
        indices = ops.argsort(self, d, descending)
        return ValuesIndices(ops.take_along_axis(self, indices, d), indices)

    def argsort(self, dim: int = -1, descending: bool = False) -> Any:
        """The indices that sort along ``dim``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([3.0, 1.0, 2.0]).argsort().tolist()
            [1, 2, 0]
        """
        return ops.argsort(self, dim_index(dim, self.ndim, "argsort"), descending)

    def topk(self, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Any:
        """``(values, indices)`` of the ``k`` largest (or smallest) entries along ``dim``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0, 5.0, 3.0]).topk(2).indices.tolist()
            [1, 2]
        """
        d = dim_index(dim, self.ndim, "topk")
        n = self.shape[d] if self.ndim else 1
        if not 0 <= k <= n:
            raise ShapeError(with_location(f"topk: k={k} is out of range for size {n}"))
        indices = ops.argsort(self, d, largest)
        lead = (slice(None),) * d
        indices = ops.getitem(indices, lead + (slice(0, k),))
        return ValuesIndices(ops.take_along_axis(self, indices, d), indices)

    def triu(self, diagonal: int = 0) -> Any:
        """The upper triangle of the last two dims (``diagonal`` shifts it), zeros elsewhere.

        Example:
            >>> import dualflow
            >>> dualflow.ops.ones((2, 3)).triu(1).tolist()
            [[0.0, 1.0, 1.0], [0.0, 0.0, 1.0]]
        """
        return _triangle(self, diagonal, upper=True)

    def tril(self, diagonal: int = 0) -> Any:
        """The lower triangle of the last two dims (``diagonal`` shifts it), zeros elsewhere.

        Example:
            >>> import dualflow
            >>> dualflow.ops.ones((2, 2)).tril().tolist()
            [[1.0, 0.0], [1.0, 1.0]]
        """
        return _triangle(self, diagonal, upper=False)


def _triangle(x: Any, diagonal: int, upper: bool) -> Any:
    if x.ndim < 2:
        raise ShapeError(with_location(f"triu/tril: expects at least 2-D, got shape {x.shape}"))
    r, c = x.shape[-2], x.shape[-1]
    if type(r) is SymInt or type(c) is SymInt:  # sizes as expressions: the mask from ops
        rows, cols = ops.reshape(ops.arange(r), (r, 1)), ops.arange(c)
    else:  # a constant mask (folded into a compiled graph)
        rows, cols = np.arange(r)[:, None], np.arange(c)
    keep = cols - rows >= diagonal if upper else cols - rows <= diagonal
    # where, not a product: masked -inf entries (attention masks) must become 0, not NaN
    return ops.where(keep, x, ops.zeros((), x.dtype))
