"""Comparison, logical and matrix-product methods with PyTorch's names and meanings.

Logical operators (``&``, ``|``, ``^``, ``~``) take bool tensors; matrix products refuse two
different floating-point dtypes, as PyTorch does, instead of upcasting silently.
"""

from __future__ import annotations

from typing import Any

from dualflow import ops
from dualflow._config import using_config
from dualflow.errors import DTypeError, ShapeError, with_location
from dualflow.ops.autocast import lowers
from dualflow.ops.validate import require_same_float
from dualflow.tensor.methods.layout import Reflected


def _require_bool(x: Any, other: Any, op: str) -> None:
    for value in (x, other):
        dtype = getattr(value, "dtype", None)
        if dtype is not None and dtype.kind != "b":
            raise DTypeError(
                with_location(
                    f"{op}: dualflow supports logical operators on bool tensors only, got {dtype}; "
                    "compare first (e.g. x > 0) or use ops for integer bit operations"
                )
            )


def _matmul_check(a: Any, b: Any, op: str, ranks: tuple[int, int] | None) -> None:
    if op in ("dot", "mv") or not lowers(a, b):  # autocast casts matmul's mixed floats
        require_same_float(op, a, b, "self", "other")
    if ranks is not None and (a.ndim, getattr(b, "ndim", -1)) != ranks:
        raise ShapeError(
            with_location(
                f"{op}: expects {ranks[0]}-D and {ranks[1]}-D operands, got shapes "
                f"{tuple(a.shape)} and {tuple(getattr(b, 'shape', ()))}"
            )
        )


class CompareMethods:
    """Tensor comparisons, logical operators and matrix products."""

    __slots__ = ()

    # ----- comparisons and logic ---------------------------------------------------------------
    def eq(self, other: Any) -> Any:
        """Elementwise ``==`` as a bool tensor.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1, 2]).eq(dualflow.tensor([1, 3])).tolist()
            [True, False]
        """
        return ops.equal(self, other)

    def ne(self, other: Any) -> Any:
        """Elementwise ``!=``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1, 2]).ne(2).tolist()
            [True, False]
        """
        return ops.not_equal(self, other)

    def lt(self, other: Any) -> Any:
        """Elementwise ``<``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1, 2]).lt(2).tolist()
            [True, False]
        """
        return ops.less(self, other)

    def le(self, other: Any) -> Any:
        """Elementwise ``<=``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1, 2]).le(2).tolist()
            [True, True]
        """
        return ops.less_equal(self, other)

    def gt(self, other: Any) -> Any:
        """Elementwise ``>``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1, 2]).gt(1).tolist()
            [False, True]
        """
        return ops.greater(self, other)

    def ge(self, other: Any) -> Any:
        """Elementwise ``>=``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1, 2]).ge(2).tolist()
            [False, True]
        """
        return ops.greater_equal(self, other)

    not_equal, less, less_equal, greater, greater_equal = ne, lt, le, gt, ge

    def equal(self, other: Any) -> bool:
        """Whether both tensors have the same shape and elements (a Python bool; a guard when
        compiled).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1, 2]).equal(dualflow.tensor([1, 2]))
            True
        """
        if tuple(self.shape) != tuple(other.shape):
            return False
        return bool(ops.sum(ops.not_equal(self, other)) == 0)

    def allclose(self, other: Any, rtol: float = 1e-5, atol: float = 1e-8) -> bool:
        """Whether ``|self - other| <= atol + rtol * |other|`` everywhere (a Python bool).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0]).allclose(dualflow.tensor([1.0 + 1e-9]))
            True
        """
        close = ops.less_equal(ops.abs(self - other), atol + rtol * ops.abs(other))
        return bool(ops.sum(ops.equal(close, False)) == 0)

    def isnan(self) -> Any:
        """Where the elements are NaN.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0, float("nan")]).isnan().tolist()
            [False, True]
        """
        return ops.not_equal(self, self)

    def isinf(self) -> Any:
        """Where the elements are +-inf.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0, float("inf")]).isinf().tolist()
            [False, True]
        """
        return ops.equal(ops.abs(self), float("inf"))

    def isfinite(self) -> Any:
        """Where the elements are neither NaN nor +-inf.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0, float("inf")]).isfinite().tolist()
            [True, False]
        """
        return ops.less(ops.abs(self), float("inf"))

    def logical_not(self) -> Any:
        """Elementwise not of a bool tensor.

        Example:
            >>> import dualflow
            >>> (~dualflow.tensor([True, False])).tolist()
            [False, True]
        """
        _require_bool(self, None, "logical_not")
        return ops.equal(self, False)

    def logical_and(self, other: Any) -> Any:
        """Elementwise and of bool tensors.

        Example:
            >>> import dualflow
            >>> (dualflow.tensor([True, True]) & dualflow.tensor([True, False])).tolist()
            [True, False]
        """
        _require_bool(self, other, "logical_and")
        return ops.multiply(self, other)

    def logical_or(self, other: Any) -> Any:
        """Elementwise or of bool tensors.

        Example:
            >>> import dualflow
            >>> (dualflow.tensor([False, True]) | dualflow.tensor([False, False])).tolist()
            [False, True]
        """
        _require_bool(self, other, "logical_or")
        return ops.maximum(self, other)

    def logical_xor(self, other: Any) -> Any:
        """Elementwise xor of bool tensors.

        Example:
            >>> import dualflow
            >>> (dualflow.tensor([True, True]) ^ dualflow.tensor([True, False])).tolist()
            [False, True]
        """
        _require_bool(self, other, "logical_xor")
        return ops.not_equal(self, other)

    __invert__ = logical_not
    __and__ = __rand__ = logical_and
    __or__ = __ror__ = logical_or
    __xor__ = __rxor__ = logical_xor

    # ----- products -----------------------------------------------------------------------------
    def matmul(self, other: Any) -> Any:
        """Matrix product with numpy's rules; both operands must have one floating dtype.

        Example:
            >>> import dualflow
            >>> a = dualflow.tensor([[1.0, 2.0]])
            >>> a.matmul(a.t()).tolist(), (a @ a.t()).tolist()
            ([[5.0]], [[5.0]])
        """
        _matmul_check(self, other, "matmul", None)
        return ops.matmul(self, other)

    def __matmul__(self, other: Any) -> Any:
        if isinstance(other, Reflected):  # dense @ sparse: SparseTensor.__rmatmul__
            return NotImplemented
        _matmul_check(self, other, "matmul", None)
        return ops.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        if not lowers(other, self):
            require_same_float("matmul", other, self, "other", "self")
        return ops.matmul(other, self)

    def mm(self, mat2: Any) -> Any:
        """The product of two matrices (2-D).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([[1.0, 2.0]]).mm(dualflow.tensor([[3.0], [4.0]])).tolist()
            [[11.0]]
        """
        _matmul_check(self, mat2, "mm", (2, 2))
        return ops.matmul(self, mat2)

    def bmm(self, mat2: Any) -> Any:
        """The product of two batches of matrices (3-D, same batch size).

        Example:
            >>> import dualflow
            >>> dualflow.ops.ones((2, 1, 3)).bmm(dualflow.ops.ones((2, 3, 4))).shape
            (2, 1, 4)
        """
        _matmul_check(self, mat2, "bmm", (3, 3))
        return ops.matmul(self, mat2)

    def mv(self, vec: Any) -> Any:
        """The product of a matrix and a vector.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([[1.0, 2.0]]).mv(dualflow.tensor([3.0, 4.0])).tolist()
            [11.0]
        """
        _matmul_check(self, vec, "mv", (2, 1))
        with using_config(autocast=None):  # on none of PyTorch's autocast lists
            return ops.matmul(self, vec)

    def dot(self, other: Any) -> Any:
        """The inner product of two vectors (1-D).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0, 2.0]).dot(dualflow.tensor([3.0, 4.0])).item()
            11.0
        """
        _matmul_check(self, other, "dot", (1, 1))
        with using_config(autocast=None):  # on none of PyTorch's autocast lists
            return ops.matmul(self, other)
