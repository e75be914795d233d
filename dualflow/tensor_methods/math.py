"""Elementwise, comparison, logical and matrix-product methods with PyTorch's names and meanings.

Each is one ``dualflow.ops`` call (or a short composite of them). Matrix products refuse two
different floating-point dtypes, as PyTorch does, instead of upcasting silently.
"""

from __future__ import annotations

from typing import Any

from dualflow import ops
from dualflow.errors import DTypeError, ShapeError, with_location
from dualflow.ops.validate import require_same_float


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
    require_same_float(op, a, b, "self", "other")
    if ranks is not None and (a.ndim, getattr(b, "ndim", -1)) != ranks:
        raise ShapeError(
            with_location(
                f"{op}: expects {ranks[0]}-D and {ranks[1]}-D operands, got shapes "
                f"{tuple(a.shape)} and {tuple(getattr(b, 'shape', ()))}"
            )
        )


class MathMethods:
    """Tensor arithmetic, math functions, comparisons and products."""

    __slots__ = ()

    # ----- unary -----------------------------------------------------------------------------
    def abs(self) -> Any:
        """``|x|``."""
        return ops.abs(self)

    absolute = abs

    def neg(self) -> Any:
        """``-x``."""
        return ops.negative(self)

    negative = neg

    def sqrt(self) -> Any:
        """Square root."""
        return ops.sqrt(self)

    def rsqrt(self) -> Any:
        """``1 / sqrt(x)``."""
        return ops.rsqrt(self)

    def square(self) -> Any:
        """``x * x``."""
        return ops.square(self)

    def reciprocal(self) -> Any:
        """``1 / x``."""
        return ops.divide(1.0, self)

    def exp(self) -> Any:
        """Exponential."""
        return ops.exp(self)

    def expm1(self) -> Any:
        """``exp(x) - 1``."""
        return ops.expm1(self)

    def log(self) -> Any:
        """Natural logarithm."""
        return ops.log(self)

    def log1p(self) -> Any:
        """``log(1 + x)``."""
        return ops.log1p(self)

    def sin(self) -> Any:
        """Sine."""
        return ops.sin(self)

    def cos(self) -> Any:
        """Cosine."""
        return ops.cos(self)

    def erf(self) -> Any:
        """Gauss error function."""
        return ops.erf(self)

    def tanh(self) -> Any:
        """Hyperbolic tangent."""
        return ops.tanh(self)

    def sigmoid(self) -> Any:
        """Logistic sigmoid."""
        return ops.sigmoid(self)

    def relu(self) -> Any:
        """``max(x, 0)``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([-1.0, 2.0]).relu().tolist()
            [0.0, 2.0]
        """
        return ops.relu(self)

    def sign(self) -> Any:
        """-1, 0 or 1 by the sign of each element (no gradient).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([-2.0, 0.0, 3.0]).sign().tolist()
            [-1.0, 0.0, 1.0]
        """
        positive = ops.cast(ops.greater(self, 0), self.dtype)  # bool casts carry no gradient
        return positive - ops.cast(ops.less(self, 0), self.dtype)

    def softmax(self, dim: int) -> Any:
        """Softmax along ``dim``."""
        return ops.softmax(self, dim)

    def log_softmax(self, dim: int) -> Any:
        """Log-softmax along ``dim``."""
        return ops.log_softmax(self, dim)

    def clamp(self, min: Any = None, max: Any = None) -> Any:
        """Clamp into ``[min, max]`` (numbers or tensors; None leaves that side open).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([-2.0, 0.5, 3.0]).clamp(min=-1.0, max=1.0).tolist()
            [-1.0, 0.5, 1.0]
        """
        if min is None and max is None:
            raise ValueError(with_location("clamp: at least one of min and max must be given"))
        if hasattr(min, "shape") or hasattr(max, "shape"):
            out = self if min is None else ops.maximum(self, min)
            return out if max is None else ops.minimum(out, max)
        return ops.clip(self, min, max)

    clip = clamp

    # ----- binary ----------------------------------------------------------------------------
    def add(self, other: Any, *, alpha: Any = 1) -> Any:
        """``self + alpha * other``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0, 2.0]).add(dualflow.tensor([1.0, 1.0]), alpha=10).tolist()
            [11.0, 12.0]
        """
        return ops.add(self, other if alpha == 1 else ops.multiply(other, alpha))

    def sub(self, other: Any, *, alpha: Any = 1) -> Any:
        """``self - alpha * other``."""
        return ops.subtract(self, other if alpha == 1 else ops.multiply(other, alpha))

    subtract = sub

    def mul(self, other: Any) -> Any:
        """``self * other``."""
        return ops.multiply(self, other)

    multiply = mul

    def div(self, other: Any, *, rounding_mode: str | None = None) -> Any:
        """``self / other`` (true division; ``rounding_mode`` is not supported)."""
        if rounding_mode is not None:
            raise NotImplementedError(
                with_location("div: rounding_mode is not supported by dualflow; divide, then cast")
            )
        return ops.divide(self, other)

    divide = true_divide = div

    def pow(self, exponent: Any) -> Any:
        """``self ** exponent``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([2.0, 3.0]).pow(2).tolist()
            [4.0, 9.0]
        """
        return ops.power(self, exponent)

    def maximum(self, other: Any) -> Any:
        """Elementwise maximum."""
        return ops.maximum(self, other)

    def minimum(self, other: Any) -> Any:
        """Elementwise minimum."""
        return ops.minimum(self, other)

    def addcmul(self, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Any:
        """``self + value * tensor1 * tensor2``."""
        return ops.add(self, ops.multiply(ops.multiply(tensor1, tensor2), value))

    def addcdiv(self, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Any:
        """``self + value * tensor1 / tensor2``."""
        return ops.add(self, ops.multiply(ops.divide(tensor1, tensor2), value))

    def lerp(self, end: Any, weight: Any) -> Any:
        """``self + weight * (end - self)``."""
        return ops.add(self, ops.multiply(ops.subtract(end, self), weight))

    # ----- comparisons and logic ---------------------------------------------------------------
    def eq(self, other: Any) -> Any:
        """Elementwise ``==`` as a bool tensor."""
        return ops.equal(self, other)

    def ne(self, other: Any) -> Any:
        """Elementwise ``!=``."""
        return ops.not_equal(self, other)

    def lt(self, other: Any) -> Any:
        """Elementwise ``<``."""
        return ops.less(self, other)

    def le(self, other: Any) -> Any:
        """Elementwise ``<=``."""
        return ops.less_equal(self, other)

    def gt(self, other: Any) -> Any:
        """Elementwise ``>``."""
        return ops.greater(self, other)

    def ge(self, other: Any) -> Any:
        """Elementwise ``>=``."""
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
        """Whether ``|self - other| <= atol + rtol * |other|`` everywhere (a Python bool)."""
        close = ops.less_equal(ops.abs(self - other), atol + rtol * ops.abs(other))
        return bool(ops.sum(ops.equal(close, False)) == 0)

    def isnan(self) -> Any:
        """Where the elements are NaN."""
        return ops.not_equal(self, self)

    def isinf(self) -> Any:
        """Where the elements are +-inf."""
        return ops.equal(ops.abs(self), float("inf"))

    def isfinite(self) -> Any:
        """Where the elements are neither NaN nor +-inf."""
        return ops.less(ops.abs(self), float("inf"))

    def logical_not(self) -> Any:
        """Elementwise not of a bool tensor."""
        _require_bool(self, None, "logical_not")
        return ops.equal(self, False)

    def logical_and(self, other: Any) -> Any:
        """Elementwise and of bool tensors."""
        _require_bool(self, other, "logical_and")
        return ops.multiply(self, other)

    def logical_or(self, other: Any) -> Any:
        """Elementwise or of bool tensors."""
        _require_bool(self, other, "logical_or")
        return ops.maximum(self, other)

    def logical_xor(self, other: Any) -> Any:
        """Elementwise xor of bool tensors."""
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
        _matmul_check(self, other, "matmul", None)
        return ops.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        require_same_float("matmul", other, self, "other", "self")
        return ops.matmul(other, self)

    def mm(self, mat2: Any) -> Any:
        """The product of two matrices (2-D)."""
        _matmul_check(self, mat2, "mm", (2, 2))
        return ops.matmul(self, mat2)

    def bmm(self, mat2: Any) -> Any:
        """The product of two batches of matrices (3-D, same batch size)."""
        _matmul_check(self, mat2, "bmm", (3, 3))
        return ops.matmul(self, mat2)

    def mv(self, vec: Any) -> Any:
        """The product of a matrix and a vector."""
        _matmul_check(self, vec, "mv", (2, 1))
        return ops.matmul(self, vec)

    def dot(self, other: Any) -> Any:
        """The inner product of two vectors (1-D)."""
        _matmul_check(self, other, "dot", (1, 1))
        return ops.matmul(self, other)
