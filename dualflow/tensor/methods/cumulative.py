"""Cumulative Tensor methods with PyTorch's signatures: ``cumsum``, ``cumprod`` (and their
in-place forms), ``cummax``, ``cummin`` (``(values, indices)``) and ``logcumsumexp``.

``dim`` is required, as in PyTorch; ``dtype=`` casts the input first, and without it bools and
integers sum and multiply in int64 (PyTorch's promotion; numpy's would keep uint64).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow import ops
from dualflow.tensor.methods.inplace import arith
from dualflow.tensor.methods.reduce import ValuesIndices
from dualflow.tensor.methods.size import dim_index


def _widened(x: Any, dtype: Any) -> Any:
    """The input of a running sum or product: cast to ``dtype``, else ints and bools to int64."""
    if dtype is not None:
        return ops.cast(x, dtype)
    if np.dtype(x.dtype).kind in "biu":
        return ops.cast(x, "int64")
    return x


class CumulativeMethods:
    """Running sums, products, extremes and log-sum-exps along one dim."""

    __slots__ = ()

    def cumsum(self, dim: int, *, dtype: Any = None) -> Any:
        """Running sum along ``dim``; bools and ints give int64 unless ``dtype`` is given.

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([[1, 2], [3, 4]], dtype=dualflow.int32)
            >>> x.cumsum(0).tolist(), str(x.cumsum(-1).dtype)
            ([[1, 2], [4, 6]], 'int64')
        """
        d = dim_index(int(dim), self.ndim, "cumsum")
        return ops.cumsum(_widened(self, dtype), d)

    def cumsum_(self, dim: int, *, dtype: Any = None) -> Any:
        """``cumsum`` in place (the result cast back to this tensor's dtype).

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([1.0, 2.0, 3.0])
            >>> x.cumsum_(0).tolist()
            [1.0, 3.0, 6.0]
        """
        return arith(self, "cumsum_", lambda: self.cumsum(dim, dtype=dtype))

    def cumprod(self, dim: int, *, dtype: Any = None) -> Any:
        """Running product along ``dim`` (exact gradients at zeros); ints give int64.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([2.0, 3.0, 4.0]).cumprod(0).tolist()
            [2.0, 6.0, 24.0]
        """
        d = dim_index(int(dim), self.ndim, "cumprod")
        return ops.cumprod(_widened(self, dtype), d)

    def cumprod_(self, dim: int, *, dtype: Any = None) -> Any:
        """``cumprod`` in place.

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([2.0, 3.0])
            >>> x.cumprod_(0).tolist()
            [2.0, 6.0]
        """
        return arith(self, "cumprod_", lambda: self.cumprod(dim, dtype=dtype))

    def cummax(self, dim: int) -> ValuesIndices:
        """``(values, indices)`` of the running maximum along ``dim`` (the gradient goes to
        the index; equal values and NaNs move the index, as in PyTorch).

        Example:
            >>> import dualflow
            >>> out = dualflow.tensor([1.0, 3.0, 2.0]).cummax(0)
            >>> out.values.tolist(), out.indices.tolist()
            ([1.0, 3.0, 3.0], [0, 1, 1])
        """
        return ValuesIndices(*ops.cummax(self, dim_index(int(dim), self.ndim, "cummax")))

    def cummin(self, dim: int) -> ValuesIndices:
        """``(values, indices)`` of the running minimum along ``dim``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([3.0, 1.0, 2.0]).cummin(0).indices.tolist()
            [0, 1, 1]
        """
        return ValuesIndices(*ops.cummin(self, dim_index(int(dim), self.ndim, "cummin")))

    def logcumsumexp(self, dim: int) -> Any:
        """``log(cumsum(exp(x)))`` along ``dim``, without overflow (floating point only).

        Example:
            >>> import dualflow
            >>> [round(v, 3) for v in dualflow.tensor([0.0, 0.0, 1e4]).logcumsumexp(0).tolist()]
            [0.0, 0.693, 10000.0]
        """
        return ops.logcumsumexp(self, dim_index(int(dim), self.ndim, "logcumsumexp"))
