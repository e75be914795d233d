"""The dense real Tensor's side of sparse COO tensors (``dualflow/tensor/sparse.py``) and complex
tensors (``dualflow/tensor/complex_tensors.py``): ``is_sparse``, ``to_sparse()``, ``to_dense()`` and
``is_complex()``, with PyTorch's meanings.
"""

from __future__ import annotations

from typing import Any


class Reflected:
    """Base of the tensor kinds beside Tensor (``ComplexTensor``, ``SparseTensor``): Tensor's
    binary operators return NotImplemented for them, so ``dense * z`` is ``z.__rmul__(dense)``
    rather than an object array."""

    __slots__ = ()


class LayoutMethods:
    """``is_sparse`` (False: a Tensor is dense), ``to_sparse``, ``to_dense``, ``is_complex``."""

    __slots__ = ()

    is_sparse = False

    def to_sparse(self, sparse_dim: int | None = None) -> Any:
        """The non-zero entries as a COO ``SparseTensor`` (coalesced; values differentiable).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([[0.0, 1.0]]).to_sparse()._indices().tolist()
            [[0], [1]]
        """
        from dualflow.tensor.sparse import from_dense  # noqa: PLC0415 - sparse builds on Tensor

        if sparse_dim is not None and sparse_dim != self.ndim:
            raise NotImplementedError(
                "to_sparse(sparse_dim): dualflow's sparse tensors have scalar values "
                "(sparse_dim == ndim)"
            )
        return from_dense(self)

    def to_dense(self, dtype: Any = None) -> Any:
        """Itself (already dense), cast to ``dtype`` if given.

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([1.0]); x.to_dense() is x
            True
        """
        return self if dtype is None else self.to(dtype)

    def is_complex(self) -> bool:
        """False: complex values live in ``ComplexTensor`` (``dualflow.view_as_complex``).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0]).is_complex()
            False
        """
        return False
