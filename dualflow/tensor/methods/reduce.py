"""Reductions with PyTorch's ``dim=``/``keepdim=`` arguments: sum, mean, prod, std, var, max, min,
argmax, all, any, norm, logsumexp... (numpy's ``axis=``/``keepdims=`` are accepted as aliases).

``x.max(dim)`` / ``x.min(dim)`` return ``(values, indices)`` as PyTorch does, the gradient going
to the returned index; without ``dim`` they return a 0-d tensor (ties share the gradient).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from dualflow import ops
from dualflow.dtypes import is_float_dtype
from dualflow.errors import DTypeError, ShapeError, with_location
from dualflow.tensor.methods.size import dim_index


class ValuesIndices(NamedTuple):
    """``(values, indices)`` from ``max(dim)``, ``min(dim)``, ``sort`` and ``topk`` (PyTorch's
    ``torch.return_types``)."""

    values: Any
    indices: Any


def _axes(x: Any, dim: Any, axis: Any, op: str) -> Any:
    """``dim`` (or numpy's ``axis``) as ``None``, an int or a tuple of ints, checked."""
    dim = axis if dim is None else dim
    if dim is None:
        return None
    if isinstance(dim, int | np.integer):
        return dim_index(int(dim), x.ndim, op)
    dims = tuple(dim_index(int(d), x.ndim, op) for d in dim)
    return dims if dims else None  # PyTorch's amax(dim=()) reduces everything


def _keep(keepdim: bool, keepdims: bool | None) -> bool:
    return bool(keepdim if keepdims is None else keepdims)


def _float_only(x: Any, op: str) -> None:
    if not is_float_dtype(x.dtype):
        raise DTypeError(
            with_location(
                f"{op}: input dtype must be floating point, got {x.dtype}; cast it first, "
                "e.g. x.float()"
            )
        )


def _extreme(x: Any, args: tuple, kwargs: dict, op: str) -> Any:
    """``max``/``min``: the full reduction, ``(values, indices)`` along a dim, or elementwise."""
    dim = args[0] if args else kwargs.pop("dim", kwargs.pop("axis", None))
    keepdim = _keep(args[1] if len(args) > 1 else kwargs.pop("keepdim", False), None)
    keepdim = bool(kwargs.pop("keepdims", keepdim))
    if kwargs:
        raise TypeError(with_location(f"{op}() got unexpected arguments {sorted(kwargs)}"))
    if dim is None:
        return getattr(ops, op)(x)
    if hasattr(dim, "shape"):  # x.max(other): the elementwise maximum
        return (ops.maximum if op == "max" else ops.minimum)(x, dim)
    d = dim_index(int(dim), x.ndim, op)
    if x.ndim == 0:
        return ValuesIndices(x, ops.zeros((), "int64"))
    indices = (ops.argmax if op == "max" else ops.argmin)(x, d, keepdims=True)
    values = ops.take_along_axis(x, indices, d)
    if not keepdim:
        values, indices = ops.squeeze(values, d), ops.squeeze(indices, d)
    return ValuesIndices(values, indices)


class ReduceMethods:
    """Tensor reductions with PyTorch's signatures."""

    __slots__ = ()

    def sum(
        self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None, axis: Any = None,
        keepdims: bool | None = None,
    ) -> Any:  # fmt: skip
        """Sum over ``dim`` (all dims when None); bools and ints sum to int64 as in PyTorch.

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([[1.0, 2.0], [3.0, 4.0]])
            >>> x.sum().item(), x.sum(dim=1).tolist(), x.sum(0, keepdim=True).shape
            (10.0, [3.0, 7.0], (1, 2))
        """
        x = self if dtype is None else ops.cast(self, dtype)
        return ops.sum(x, _axes(self, dim, axis, "sum"), _keep(keepdim, keepdims))

    def mean(
        self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None, axis: Any = None,
        keepdims: bool | None = None,
    ) -> Any:  # fmt: skip
        """Mean over ``dim`` (floating-point inputs only, as in PyTorch).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([[1.0, 2.0], [3.0, 4.0]]).mean(-1).tolist()
            [1.5, 3.5]
        """
        x = self if dtype is None else ops.cast(self, dtype)
        _float_only(x, "mean")
        return ops.mean(x, _axes(self, dim, axis, "mean"), _keep(keepdim, keepdims))

    def prod(self, dim: int | None = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
        """Product over ``dim`` (all elements when None).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([[1.0, 2.0], [3.0, 4.0]]).prod(1).tolist()
            [2.0, 12.0]
        """
        x = self if dtype is None else ops.cast(self, dtype)
        return ops.prod(x, _axes(self, dim, None, "prod"), keepdim)

    def var(
        self, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
        correction: int | None = None, axis: Any = None, keepdims: bool | None = None,
    ) -> Any:  # fmt: skip
        """Variance over ``dim``; unbiased (``correction=1``) by default, as in PyTorch.

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([1.0, 2.0, 3.0, 4.0])
            >>> round(x.var().item(), 4), x.var(unbiased=False).item(), x.var(correction=0).item()
            (1.6667, 1.25, 1.25)
        """
        _float_only(self, "var")
        ddof = _ddof(unbiased, correction)
        return ops.var(self, _axes(self, dim, axis, "var"), _keep(keepdim, keepdims), ddof)

    def std(
        self, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
        correction: int | None = None, axis: Any = None, keepdims: bool | None = None,
    ) -> Any:  # fmt: skip
        """Standard deviation over ``dim``; unbiased by default, as in PyTorch.

        Example:
            >>> import dualflow
            >>> round(dualflow.tensor([1.0, 3.0]).std().item(), 4)
            1.4142
        """
        return ops.sqrt(
            self.var(dim, unbiased, keepdim, correction=correction, axis=axis, keepdims=keepdims)
        )

    def max(self, *args: Any, **kwargs: Any) -> Any:
        """``max()``: the largest element (0-d); ``max(dim, keepdim=False)``: ``(values,
        indices)`` along ``dim``; ``max(other)``: the elementwise maximum.

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([[1.0, 5.0], [3.0, 2.0]])
            >>> x.max().item(), x.max(1).values.tolist(), x.max(dim=1)[1].tolist()
            (5.0, [5.0, 3.0], [1, 0])
        """
        return _extreme(self, args, dict(kwargs), "max")

    def min(self, *args: Any, **kwargs: Any) -> Any:
        """``min()``, ``min(dim, keepdim=False)`` -> ``(values, indices)``, or ``min(other)``.

        Example:
            >>> import dualflow
            >>> values, indices = dualflow.tensor([[1.0, 5.0], [3.0, 2.0]]).min(0)
            >>> values.tolist(), indices.tolist()
            ([1.0, 2.0], [0, 1])
        """
        return _extreme(self, args, dict(kwargs), "min")

    def amax(self, dim: Any = (), keepdim: bool = False) -> Any:
        """The maximum over ``dim`` (all dims by default); ties share the gradient.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([[1.0, 5.0], [3.0, 2.0]]).amax(0).tolist()
            [3.0, 5.0]
        """
        return ops.max(self, _axes(self, dim, None, "amax"), keepdim)

    def amin(self, dim: Any = (), keepdim: bool = False) -> Any:
        """The minimum over ``dim`` (all dims by default).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([[1.0, 5.0], [3.0, 2.0]]).amin(1).tolist()
            [1.0, 2.0]
        """
        return ops.min(self, _axes(self, dim, None, "amin"), keepdim)

    def argmax(self, dim: int | None = None, keepdim: bool = False, *, axis: Any = None) -> Any:
        """Index of the first maximum along ``dim`` (of the flattened tensor when None).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([[1.0, 5.0], [3.0, 2.0]]).argmax(dim=1).tolist()
            [1, 0]
        """
        d = _axes(self, dim, axis, "argmax")
        return ops.argmax(self, d, keepdims=keepdim and d is not None)

    def argmin(self, dim: int | None = None, keepdim: bool = False, *, axis: Any = None) -> Any:
        """Index of the first minimum along ``dim`` (of the flattened tensor when None).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([[1.0, 5.0], [3.0, 2.0]]).argmin().item()
            0
        """
        d = _axes(self, dim, axis, "argmin")
        return ops.argmin(self, d, keepdims=keepdim and d is not None)

    def all(self, dim: Any = None, keepdim: bool = False) -> Any:
        """Whether every element (along ``dim``) is non-zero, as a bool tensor.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([[True, False], [True, True]]).all(1).tolist()
            [False, True]
        """
        zeros = ops.sum(ops.equal(self, 0), _axes(self, dim, None, "all"), keepdim)
        return ops.equal(zeros, 0)

    def any(self, dim: Any = None, keepdim: bool = False) -> Any:
        """Whether some element (along ``dim``) is non-zero, as a bool tensor.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([[0.0, 0.0], [0.0, 2.0]]).any(dim=1).tolist()
            [False, True]
        """
        nonzero = ops.sum(ops.not_equal(self, 0), _axes(self, dim, None, "any"), keepdim)
        return ops.greater(nonzero, 0)

    def count_nonzero(self, dim: Any = None) -> Any:
        """The number of non-zero elements (along ``dim``).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([0.0, 1.0, 2.0]).count_nonzero().item()
            2
        """
        return ops.sum(ops.not_equal(self, 0), _axes(self, dim, None, "count_nonzero"))

    def norm(self, p: Any = "fro", dim: Any = None, keepdim: bool = False) -> Any:
        """The vector p-norm over ``dim`` (all elements when None): ``p`` in ``"fro"``, 2, 1,
        ``inf``, ``-inf``, 0 or any other number. The 2-norm's gradient at 0 is 0.

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([[3.0, -4.0]])
            >>> x.norm().item(), x.norm(1, dim=1).tolist(), x.norm(float("inf")).item()
            (5.0, [7.0], 4.0)
        """
        return vector_norm(self, p, _axes(self, dim, None, "norm"), keepdim)

    def logsumexp(self, dim: Any, keepdim: bool = False) -> Any:
        """``log(sum(exp(x)))`` over ``dim``, stable for large values.

        Example:
            >>> import dualflow
            >>> round(dualflow.tensor([[0.0, 0.0]]).logsumexp(1).item(), 4)
            0.6931
        """
        return ops.logsumexp(self, _axes(self, dim, None, "logsumexp"), keepdim)


def _ddof(unbiased: bool | None, correction: int | None) -> int:
    if correction is not None:
        return int(correction)
    return 0 if unbiased is False else 1


def vector_norm(x: Any, p: Any, axes: Any, keepdim: bool) -> Any:
    """The p-norm of ``x`` over ``axes`` (the implementation of ``Tensor.norm``).

    Example:
        >>> import dualflow
        >>> vector_norm(dualflow.tensor([3.0, 4.0]), 2, None, False).item()
        5.0
    """
    _float_only(x, "norm")
    if p in ("fro", 2, 2.0):
        squares = ops.sum(x * x, axes, keepdim)
        positive = ops.greater(squares, 0)
        # sqrt only where the sum is positive: a zero vector gets gradient 0, not NaN
        return ops.where(positive, ops.sqrt(ops.where(positive, squares, 1.0)), 0.0)
    if isinstance(p, str):
        raise ShapeError(with_location(f"norm: unsupported p={p!r}; use 'fro' or a number"))
    magnitude = ops.abs(x)
    if p == math.inf:
        return ops.max(magnitude, axes, keepdim)
    if p == -math.inf:
        return ops.min(magnitude, axes, keepdim)
    if p == 0:
        return ops.cast(ops.sum(ops.not_equal(x, 0), axes, keepdim), x.dtype)
    if p == 1:
        return ops.sum(magnitude, axes, keepdim)
    return ops.sum(magnitude**p, axes, keepdim) ** (1.0 / p)
