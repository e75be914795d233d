"""Shape methods with PyTorch's meanings: size(), dim(), view, transpose(d0, d1), permute, expand...

Each is a reshape, transpose, broadcast or slice op (``dualflow.ops``); ``transpose`` swaps two
dims as in PyTorch, while the numpy-style axis permutation is ``permute`` (or ``ops.transpose``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from dualflow import ops
from dualflow.errors import ShapeError, with_location
from dualflow.ops.dispatch import apply
from dualflow.ops.slicing import GetItem, axis_slice
from dualflow.symbolic_containers import as_shape
from dualflow.symbolic_shapes import ACTIVE as SYMBOLIC_TRACES
from dualflow.tensor.methods.size import Size, dim_index, shape_args


class ShapeMethods:
    """Tensor methods that reshape, reorder, broadcast or slice."""

    __slots__ = ()

    def size(self, dim: int | None = None) -> Any:
        """The shape as a ``Size`` (a tuple), or the length of dimension ``dim``.

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([[1.0, 2.0, 3.0]])
            >>> x.size(), x.size(1), x.size(-2)
            (dualflow.Size([1, 3]), 3, 1)
        """
        shape = self.shape  # sizes as expressions while traced with dynamic dimensions
        if dim is None:
            return Size(shape)
        return shape[dim_index(dim, len(shape), "size")]

    def dim(self) -> int:
        """The number of dimensions (``ndim``).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([[1.0]]).dim()
            2
        """
        return self.raw_array.ndim

    ndimension = dim

    def numel(self) -> int:
        """The number of elements.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([[1.0, 2.0, 3.0]]).numel()
            3
        """
        if SYMBOLIC_TRACES[0]:  # an expression while traced with dynamic dimensions
            return math.prod(self.shape)
        return self.raw_array.size

    nelement = numel

    def view(self, *shape: Any) -> Any:
        """The same data with a new shape (one dimension may be -1).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0, 2.0, 3.0, 4.0]).view(2, -1).shape
            (2, 2)
        """
        return ops.reshape(self, shape_args(shape))

    reshape = view

    def view_as(self, other: Any) -> Any:
        """``view(other.shape)``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0, 2.0]).view_as(dualflow.tensor([[0.0], [0.0]])).shape
            (2, 1)
        """
        return ops.reshape(self, tuple(other.shape))

    reshape_as = view_as

    def squeeze(self, dim: int | Sequence[int] | None = None) -> Any:
        """Drop size-1 dims (all, or those in ``dim``; a named dim that is not 1 is kept).

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([[[1.0, 2.0]]])
            >>> x.squeeze().shape, x.squeeze(2).shape, x.squeeze(0).shape
            ((2,), (1, 1, 2), (1, 2))
        """
        shape = self.shape
        if dim is None:
            keep = [d for d in shape if d != 1]
        else:
            dims = (dim,) if isinstance(dim, int) else tuple(dim)
            drop = {dim_index(d, len(shape), "squeeze") for d in dims}
            keep = [n for i, n in enumerate(shape) if i not in drop or n != 1]
        return ops.reshape(self, tuple(keep))  # a new view even when nothing is dropped

    def unsqueeze(self, dim: int) -> Any:
        """Insert a size-1 dimension at ``dim`` (negative counts from the new rank).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0, 2.0]).unsqueeze(-1).shape
            (2, 1)
        """
        shape = list(self.shape)
        shape.insert(dim_index(dim, len(shape) + 1, "unsqueeze"), 1)
        return ops.reshape(self, tuple(shape))

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Any:
        """Merge dims ``start_dim..end_dim`` into one (a 0-d tensor becomes 1-D).

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([[[1.0, 2.0]], [[3.0, 4.0]]])
            >>> x.flatten().shape, x.flatten(1).shape
            ((4,), (2, 2))
        """
        shape = self.shape
        if not shape:
            return ops.reshape(self, (1,))
        start, end = (dim_index(d, len(shape), "flatten") for d in (start_dim, end_dim))
        if start > end:
            raise ShapeError(with_location("flatten: start_dim cannot come after end_dim"))
        merged = math.prod(shape[start : end + 1])
        return ops.reshape(self, shape[:start] + (merged,) + shape[end + 1 :])

    def unflatten(self, dim: int, sizes: Sequence[int]) -> Any:
        """Split dimension ``dim`` into ``sizes`` (one may be -1).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([[1.0, 2.0, 3.0, 4.0]]).unflatten(1, (2, -1)).shape
            (1, 2, 2)
        """
        shape = self.shape
        d = dim_index(dim, len(shape), "unflatten")
        return ops.reshape(self, shape[:d] + as_shape(sizes) + shape[d + 1 :])

    def permute(self, *dims: Any) -> Any:
        """Reorder all dimensions: output dim i is input dim ``dims[i]``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([[[1.0, 2.0, 3.0]]]).permute(2, 0, 1).shape
            (3, 1, 1)
        """
        order = shape_args(dims, "permute dims")
        ndim = self.ndim
        if len(order) != ndim:
            raise ShapeError(
                with_location(f"permute: {len(order)} dims given for a {ndim}-D tensor")
            )
        return ops.transpose(self, tuple(dim_index(d, ndim, "permute") for d in order))

    def transpose(self, dim0: int, dim1: int) -> Any:
        """Swap dimensions ``dim0`` and ``dim1`` (PyTorch; ``permute`` reorders all of them).

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([[1.0, 2.0, 3.0]])
            >>> x.transpose(0, 1).tolist()
            [[1.0], [2.0], [3.0]]
        """
        ndim = self.ndim
        a, b = dim_index(dim0, ndim, "transpose"), dim_index(dim1, ndim, "transpose")
        if ndim < 2:
            return ops.reshape(self, self.shape)  # a new view, as PyTorch returns
        order = list(range(ndim))
        order[a], order[b] = order[b], order[a]
        return ops.transpose(self, tuple(order))

    swapaxes = swapdims = transpose

    def t(self) -> Any:
        """The transpose of a matrix (at most 2-D; 0-D and 1-D tensors are returned as is).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([[1.0, 2.0]]).t().shape
            (2, 1)
        """
        if self.ndim > 2:
            raise ShapeError(
                with_location(f"t: expects a tensor of at most 2-D, got {self.ndim}-D")
            )
        return ops.reshape(self, self.shape) if self.ndim < 2 else ops.transpose(self)

    @property
    def T(self) -> Any:
        """All dimensions reversed (numpy's and PyTorch's ``.T``).

        Example:
            >>> import dualflow
            >>> dualflow.ops.zeros((2, 3)).T.shape
            (3, 2)
        """
        return ops.transpose(self)

    @property
    def mT(self) -> Any:
        """The last two dimensions swapped (a batch of matrices transposed).

        Example:
            >>> import dualflow
            >>> dualflow.ops.zeros((4, 2, 3)).mT.shape
            (4, 3, 2)
        """
        return self.transpose(-2, -1)

    def expand(self, *sizes: Any) -> Any:
        """Broadcast to ``sizes`` (-1 keeps a dimension; new dims go in front).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([[1.0], [2.0]]).expand(3, -1, 4).shape
            (3, 2, 4)
        """
        target = list(shape_args(sizes, "expand sizes"))
        lead = len(target) - self.ndim
        if lead < 0:
            raise ShapeError(
                with_location(f"expand: {len(target)} sizes for a {self.ndim}-D tensor")
            )
        for i, d in enumerate(self.shape):
            if target[lead + i] == -1:
                target[lead + i] = d
        return ops.broadcast_to(self, tuple(target))

    def expand_as(self, other: Any) -> Any:
        """``expand(other.shape)``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0]).expand_as(dualflow.tensor([[0.0, 0.0]])).tolist()
            [[1.0, 1.0]]
        """
        return ops.broadcast_to(self, tuple(other.shape))

    def broadcast_to(self, *shape: Any) -> Any:
        """Broadcast to ``shape`` with numpy's rules.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0, 2.0]).broadcast_to((2, 2)).shape
            (2, 2)
        """
        return ops.broadcast_to(self, shape_args(shape))

    def repeat(self, *sizes: Any) -> Any:
        """Tile the tensor ``sizes[i]`` times along dim i (numpy's ``tile``).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0, 2.0]).repeat(2, 2).tolist()
            [[1.0, 2.0, 1.0, 2.0], [1.0, 2.0, 1.0, 2.0]]
        """
        reps = shape_args(sizes, "repeat sizes")
        if len(reps) < self.ndim:
            raise ShapeError(
                with_location(
                    f"repeat: {len(reps)} repeat counts for a {self.ndim}-D tensor; give at "
                    "least one per dimension"
                )
            )
        shape = (1,) * (len(reps) - self.ndim) + self.shape
        spread = tuple(v for d in shape for v in (1, d))
        tiled = tuple(v for r, d in zip(reps, shape) for v in (r, d))
        x = ops.broadcast_to(ops.reshape(self, spread), tiled)
        return ops.reshape(x, tuple(r * d for r, d in zip(reps, shape)))

    def narrow(self, dim: int, start: int, length: int) -> Any:
        """The slice ``start:start + length`` of dimension ``dim``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0, 2.0, 3.0, 4.0]).narrow(0, 1, 2).tolist()
            [2.0, 3.0]
        """
        d = dim_index(dim, self.ndim, "narrow")
        n = self.shape[d]
        start = start + n if start < 0 else start
        if not 0 <= start <= n or length < 0 or start + length > n:
            raise ShapeError(
                with_location(f"narrow: start {start} + length {length} exceeds dimension size {n}")
            )
        return _slice(self, d, start, start + length)

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Any, ...]:
        """Split into ``chunks`` pieces of ``ceil(n / chunks)`` (the last may be smaller).

        Example:
            >>> import dualflow
            >>> [c.tolist() for c in dualflow.tensor([1.0, 2.0, 3.0]).chunk(2)]
            [[1.0, 2.0], [3.0]]
        """
        if chunks < 1:
            raise ShapeError(with_location(f"chunk: chunks must be at least 1, got {chunks}"))
        n = self.shape[dim_index(dim, self.ndim, "chunk")]
        return self.split(max(-(-n // chunks), 1), dim)

    def split(self, split_size_or_sections: int | Sequence[int], dim: int = 0) -> tuple[Any, ...]:
        """Pieces of ``split_size`` along ``dim`` (the last may be smaller), or of the sizes in a
        list (which must add up to the dimension).

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([1.0, 2.0, 3.0])
            >>> [p.tolist() for p in x.split(2)], [p.shape for p in x.split([1, 2])]
            ([[1.0, 2.0], [3.0]], [(1,), (2,)])
        """
        d = dim_index(dim, self.ndim, "split")
        n = self.shape[d]
        if isinstance(split_size_or_sections, int):
            step = split_size_or_sections
            if step < 1 and n:
                raise ShapeError(with_location(f"split: split_size must be positive, got {step}"))
            sizes = [min(step, n - s) for s in range(0, n, step)] if n else [0]
        else:
            sizes = [int(s) for s in split_size_or_sections]
            if sum(sizes) != n or min(sizes, default=0) < 0:
                raise ShapeError(
                    with_location(
                        f"split: sizes {sizes} must be non-negative and add up to {n} (dimension "
                        f"{d} of shape {self.shape})"
                    )
                )
        starts = [sum(sizes[:i]) for i in range(len(sizes))]
        return tuple(_slice(self, d, s, s + k) for s, k in zip(starts, sizes))

    def unbind(self, dim: int = 0) -> tuple[Any, ...]:
        """The slices along ``dim``, each without that dimension.

        Example:
            >>> import dualflow
            >>> [r.tolist() for r in dualflow.tensor([[1.0, 2.0], [3.0, 4.0]]).unbind(1)]
            [[1.0, 3.0], [2.0, 4.0]]
        """
        d = dim_index(dim, self.ndim, "unbind")
        lead = (slice(None),) * d
        return tuple(ops.getitem(self, lead + (i,)) for i in range(self.shape[d]))

    def contiguous(self) -> Any:
        """This tensor if its data is in C order, else a C-ordered copy.

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([[1.0, 2.0]])
            >>> x.contiguous() is x, x.t().contiguous().tolist()
            (True, [[1.0], [2.0]])
        """
        return self if self.raw_array.flags.c_contiguous else ops.copy(self)

    def flip(self, *dims: Any) -> Any:
        """Reverse the order of elements along ``dims``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([[1.0, 2.0]]).flip(1).tolist()
            [[2.0, 1.0]]
        """
        return ops.flip(self, shape_args(dims, "flip dims"))


def _slice(x: Any, dim: int, start: int, stop: int) -> Any:
    return apply(GetItem, x, index=axis_slice(x.ndim, dim, start, stop))
