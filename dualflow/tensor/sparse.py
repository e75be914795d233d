"""Sparse COO tensors with PyTorch's API (``torch.sparse_coo_tensor``, ``Tensor.to_sparse``,
``torch.sparse.mm``/``torch.spmm``) and this module as ``torch.sparse``.

A ``SparseTensor`` keeps PyTorch's COO pair, an int64 ``indices`` tensor of shape ``(ndim, nnz)``
and a ``values`` tensor of shape ``(nnz,)``, so ``_indices()``/``_values()``, ``coalesce()`` and
duplicate entries behave as in PyTorch. Computation is **dense-backed**: ``to_dense()`` adds the
values into a dense tensor (duplicates summed) and ``mm`` multiplies that dense matrix, so memory
and time are those of the dense operands. Gradients reach ``values`` and the dense operand
through ordinary ops (``to_dense``/``mm``/``coalesce`` work inside compiled functions; finding
the non-zeros of ``to_sparse`` and the distinct indices of ``coalesce`` read values, which fails
closed there as ``unique`` does).

Example:
    >>> import dualflow
    >>> s = dualflow.sparse_coo_tensor([[0, 1, 1], [2, 0, 0]], [1.0, 2.0, 3.0], (2, 3))
    >>> s.to_dense().tolist()
    [[0.0, 0.0, 1.0], [5.0, 0.0, 0.0]]
    >>> dualflow.sparse.mm(s, dualflow.ones(3, 1)).tolist()
    [[1.0], [5.0]]
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from dualflow import ops
from dualflow.errors import ShapeError, with_location
from dualflow.tensor.core import Tensor, as_tensor, tensor
from dualflow.tensor.methods.layout import Reflected
from dualflow.tensor.methods.unique import values_of


@dataclasses.dataclass(eq=False, repr=False, init=False)
class SparseTensor(Reflected):
    """A COO sparse tensor: ``indices`` (int64, ``(ndim, nnz)``), ``values`` (``(nnz,)``) and
    a ``size``; see the module docstring (dense-backed computation).

    Example:
        >>> import dualflow
        >>> s = dualflow.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse()
        >>> s.is_sparse, s._indices().tolist(), s._values().tolist()
        (True, [[0, 1], [1, 0]], [2.0, 3.0])
    """

    # Dataclass fields, so compiled functions take and return it as a container of its
    # indices and values (tracer/pytree.py), never as an opaque object baked into the plan.
    _idx: Tensor
    _vals: Tensor
    _size: tuple[int, ...]
    _coalesced: bool
    is_sparse = True
    layout = "sparse_coo"

    def __init__(self, indices: Tensor, values: Tensor, size: tuple[int, ...], coalesced: bool):
        self._idx, self._vals, self._size = indices, values, tuple(int(n) for n in size)
        self._coalesced = bool(coalesced)

    # ----- PyTorch's attributes -------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._size

    def size(self, dim: int | None = None) -> Any:
        """The shape, or its size along ``dim``."""
        return self._size if dim is None else self._size[dim]

    def dim(self) -> int:
        """The number of dimensions."""
        return len(self._size)

    ndim = property(dim)
    dtype = property(lambda self: self._vals.dtype)
    device = property(lambda self: self._vals.device)
    requires_grad = property(lambda self: self._vals.requires_grad)

    @property
    def grad(self) -> SparseTensor | None:
        """The gradient with respect to the values, as a sparse tensor of the same indices."""
        grad = self._vals.grad
        return None if grad is None else SparseTensor(self._idx, grad, self._size, self._coalesced)

    def requires_grad_(self, flag: bool = True) -> SparseTensor:
        """Make the values require grad (a leaf's)."""
        self._vals.requires_grad_(flag)
        return self

    def sparse_dim(self) -> int:
        """Dimensions held by the indices (all of them: values are scalars here)."""
        return len(self._size)

    def dense_dim(self) -> int:
        """Dimensions of each value (none here)."""
        return 0

    def _nnz(self) -> int:
        """Stored entries, duplicates included."""
        return int(self._vals.shape[0])

    def _indices(self) -> Tensor:
        """The stored indices, duplicates and order as given."""
        return self._idx

    def _values(self) -> Tensor:
        """The stored values, duplicates and order as given (differentiable)."""
        return self._vals

    def indices(self) -> Tensor:
        """The indices of a coalesced tensor (PyTorch refuses an uncoalesced one)."""
        self._need_coalesced("indices")
        return self._idx

    def values(self) -> Tensor:
        """The values of a coalesced tensor (PyTorch refuses an uncoalesced one)."""
        self._need_coalesced("values")
        return self._vals

    def _need_coalesced(self, what: str) -> None:
        if not self._coalesced:
            raise RuntimeError(
                with_location(
                    f"Cannot get {what} on an uncoalesced tensor, please call .coalesce() first"
                )
            )

    def is_coalesced(self) -> bool:
        """Whether indices are sorted and distinct."""
        return self._coalesced

    # ----- conversions ------------------------------------------------------------------------
    def coalesce(self) -> SparseTensor:
        """Sorted, distinct indices with the duplicates' values summed."""
        if self._coalesced:
            return self
        flat = np.ravel_multi_index(tuple(values_of(self._idx, "coalesce")), self._size)
        distinct, inverse = np.unique(flat, return_inverse=True)
        values = ops.zeros((distinct.size,), self.dtype, self.device)
        values = values.index_add(0, tensor(inverse.reshape(-1), device=self.device), self._vals)
        rows = np.stack(np.unravel_index(distinct, self._size)).astype(np.int64)
        return SparseTensor(tensor(rows, device=self.device), values, self._size, True)

    def to_dense(self) -> Tensor:
        """The dense tensor (duplicates summed); differentiable with respect to the values."""
        numel = int(np.prod(self._size))
        strides = np.cumprod((1,) + self._size[:0:-1])[::-1].astype(np.int64)
        flat = ops.sum(self._idx * tensor(strides.reshape(-1, 1), device=self.device), 0)
        dense = ops.zeros((numel,), self.dtype, self.device).index_add(0, flat, self._vals)
        return ops.reshape(dense, self._size)

    def to_sparse(self) -> SparseTensor:
        """Itself (already sparse)."""
        return self

    def mm(self, other: Any) -> Tensor:
        """``self @ other`` with a dense ``other`` (dense result)."""
        return mm(self, other)

    __matmul__ = mm

    def __rmatmul__(self, other: Any) -> Tensor:
        return mm(other, self)

    def __add__(self, other: Any) -> Any:
        """``sparse + sparse`` stays sparse, with PyTorch's entries: merged when both are
        coalesced, values added when the indices are equal, else concatenated."""
        if isinstance(other, SparseTensor):
            if other._size != self._size:
                raise ShapeError(with_location(f"add: sizes {self._size} and {other._size} differ"))
            return _add_sparse(self, other)
        raise RuntimeError(
            with_location(
                "add(sparse, dense) is not supported. Use add(dense, sparse) instead (as PyTorch)"
            )
        )

    def __radd__(self, other: Any) -> Tensor:
        """``dense + sparse`` is dense."""
        return other + self.to_dense()

    def __mul__(self, other: Any) -> SparseTensor:
        """``sparse * number``: the values scaled (a sparse result)."""
        if hasattr(other, "shape") and len(other.shape):
            raise TypeError(
                "sparse * tensor is not supported by dualflow's sparse tensors; multiply "
                "s.to_dense() or scale s._values()"
            )
        return SparseTensor(self._idx, self._vals * other, self._size, self._coalesced)

    __rmul__ = __mul__

    def __neg__(self) -> SparseTensor:
        return self * -1

    def t(self) -> SparseTensor:
        """The transpose of a 2-D sparse tensor."""
        if len(self._size) != 2:
            raise ShapeError(with_location(f"t: expects a 2-D tensor, got {self._size}"))
        swapped = ops.getitem(self._idx, ([1, 0],))
        return SparseTensor(swapped, self._vals, self._size[::-1], False)

    def detach(self) -> SparseTensor:
        """The same entries without history."""
        return SparseTensor(self._idx, self._vals.detach(), self._size, self._coalesced)

    def __repr__(self) -> str:
        return (
            f"tensor(indices={self._idx.tolist()},\n       values={self._vals.tolist()},\n"
            f"       size={self._size}, nnz={self._nnz()}, layout=torch.sparse_coo)"
        )


def _add_sparse(a: SparseTensor, b: SparseTensor) -> SparseTensor:
    """PyTorch's ``sparse + sparse`` (its three cases read the indices unless shared)."""
    if a._idx is b._idx or _same_indices(a, b):
        return SparseTensor(a._idx, a._vals + b._vals, a._size, a._coalesced)
    indices = ops.concat([a._idx, b._idx], axis=1)
    joined = SparseTensor(indices, ops.concat([a._vals, b._vals], axis=0), a._size, False)
    return joined.coalesce() if a._coalesced and b._coalesced else joined


def _same_indices(a: SparseTensor, b: SparseTensor) -> bool:
    if a._idx.shape != b._idx.shape:
        return False
    return bool(np.array_equal(values_of(a._idx, "sparse + sparse"), values_of(b._idx, "add")))


def sparse_coo_tensor(
    indices: Any,
    values: Any,
    size: Any = None,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    check_invariants: bool | None = None,
    is_coalesced: bool | None = None,
) -> SparseTensor:
    """A COO sparse tensor with ``values`` at the columns of ``indices`` (``(ndim, nnz)``);
    ``size`` defaults to one past the largest index of each dimension.

    Example:
        >>> sparse_coo_tensor([[0, 0], [1, 1]], [2.0, 3.0]).coalesce().values().tolist()
        [5.0]
    """
    idx = indices if isinstance(indices, Tensor) else tensor(indices, dtype="int64", device=device)
    vals = values if isinstance(values, Tensor) else tensor(values, dtype=dtype, device=device)
    if dtype is not None:
        vals = vals.to(dtype)
    if requires_grad:
        vals.requires_grad_()
    if len(idx.shape) != 2 or len(vals.shape) != 1 or idx.shape[1] != vals.shape[0]:
        raise ShapeError(
            with_location(
                f"sparse_coo_tensor: indices of shape {tuple(idx.shape)} must be (ndim, nnz) and "
                f"values of shape {tuple(vals.shape)} must be (nnz,) (no dense dimensions)"
            )
        )
    if size is None:
        found = values_of(idx, "sparse_coo_tensor without size")
        size = tuple(int(n) + 1 for n in found.max(axis=1)) if found.size else (0,) * len(found)
    size = tuple(int(n) for n in size)
    if len(size) != idx.shape[0]:
        raise ShapeError(
            with_location(f"sparse_coo_tensor: size {size} must have {idx.shape[0]} dimensions")
        )
    return SparseTensor(idx, vals, size, bool(is_coalesced))


def from_dense(x: Tensor) -> SparseTensor:
    """``x.to_sparse()``: the non-zero entries of ``x`` (coalesced; differentiable values).

    Example:
        >>> from_dense(tensor([0.0, 4.0]))._values().tolist()
        [4.0]
    """
    where = np.nonzero(values_of(x, "to_sparse"))
    rows = np.stack(where).astype(np.int64) if x.ndim else np.zeros((0, 1), np.int64)
    picked = ops.getitem(x, tuple(w for w in where)) if x.ndim else ops.reshape(x, (1,))
    return SparseTensor(tensor(rows, device=x.device), picked, tuple(x.shape), True)


def mm(mat1: Any, mat2: Any) -> Tensor:
    """``mat1 @ mat2``: PyTorch's ``torch.sparse.mm``/``torch.spmm`` (dense unless both are
    sparse); the gradient reaches sparse operands' values and dense operands.

    Example:
        >>> s = sparse_coo_tensor([[0], [1]], [2.0], (1, 2))
        >>> mm(s, tensor([[1.0], [3.0]])).tolist()
        [[6.0]]
    """
    both = isinstance(mat1, SparseTensor) and isinstance(mat2, SparseTensor)
    left = mat1.to_dense() if isinstance(mat1, SparseTensor) else as_tensor(mat1)
    right = mat2.to_dense() if isinstance(mat2, SparseTensor) else as_tensor(mat2)
    if left.ndim != 2 or right.ndim != 2:
        raise ShapeError(
            with_location(f"sparse.mm: expects 2-D matrices, got {left.shape} and {right.shape}")
        )
    product = ops.matmul(left, right)
    return from_dense(product) if both else product  # sparse @ sparse is sparse in PyTorch


spmm = mm


def sum(input: Any, dim: Any = None) -> Tensor:
    """``torch.sparse.sum``: the sum of the entries (over ``dim``), as a dense tensor.

    Example:
        >>> sum(sparse_coo_tensor([[0, 0]], [1.0, 2.0], (3,))).item()
        3.0
    """
    dense = input.to_dense() if isinstance(input, SparseTensor) else as_tensor(input)
    return dense.sum() if dim is None else dense.sum(dim)
