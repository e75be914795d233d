"""Elementwise math methods with PyTorch's names and meanings: unary functions, arithmetic with
``alpha=``/``value=``, clamp, softmax.

Each is one ``dualflow.ops`` call (or a short composite of them).
"""

from __future__ import annotations

from typing import Any

from dualflow import ops
from dualflow.errors import with_location


class MathMethods:
    """Tensor arithmetic and math functions."""

    __slots__ = ()

    # ----- unary -----------------------------------------------------------------------------
    def abs(self) -> Any:
        """``|x|``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([-1.5, 2.0]).abs().tolist()
            [1.5, 2.0]
        """
        return ops.abs(self)

    absolute = abs

    def neg(self) -> Any:
        """``-x``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0, -2.0]).neg().tolist()
            [-1.0, 2.0]
        """
        return ops.negative(self)

    negative = neg

    def sqrt(self) -> Any:
        """Square root.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([4.0, 9.0]).sqrt().tolist()
            [2.0, 3.0]
        """
        return ops.sqrt(self)

    def rsqrt(self) -> Any:
        """``1 / sqrt(x)``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([4.0]).rsqrt().tolist()
            [0.5]
        """
        return ops.rsqrt(self)

    def square(self) -> Any:
        """``x * x``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([3.0]).square().tolist()
            [9.0]
        """
        return ops.square(self)

    def reciprocal(self) -> Any:
        """``1 / x``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([4.0]).reciprocal().tolist()
            [0.25]
        """
        return ops.divide(1.0, self)

    def exp(self) -> Any:
        """Exponential.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([0.0]).exp().tolist()
            [1.0]
        """
        return ops.exp(self)

    def expm1(self) -> Any:
        """``exp(x) - 1``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([0.0]).expm1().tolist()
            [0.0]
        """
        return ops.expm1(self)

    def log(self) -> Any:
        """Natural logarithm.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0]).log().tolist()
            [0.0]
        """
        return ops.log(self)

    def log1p(self) -> Any:
        """``log(1 + x)``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([0.0]).log1p().tolist()
            [0.0]
        """
        return ops.log1p(self)

    def sin(self) -> Any:
        """Sine.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([0.0]).sin().tolist()
            [0.0]
        """
        return ops.sin(self)

    def cos(self) -> Any:
        """Cosine.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([0.0]).cos().tolist()
            [1.0]
        """
        return ops.cos(self)

    def erf(self) -> Any:
        """Gauss error function.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([0.0]).erf().tolist()
            [0.0]
        """
        return ops.erf(self)

    def tanh(self) -> Any:
        """Hyperbolic tangent.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([0.0]).tanh().tolist()
            [0.0]
        """
        return ops.tanh(self)

    def sigmoid(self) -> Any:
        """Logistic sigmoid.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([0.0]).sigmoid().tolist()
            [0.5]
        """
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
        """Softmax along ``dim``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([[0.0, 0.0]]).softmax(1).tolist()
            [[0.5, 0.5]]
        """
        return ops.softmax(self, dim)

    def log_softmax(self, dim: int) -> Any:
        """Log-softmax along ``dim``.

        Example:
            >>> import dualflow
            >>> [round(v, 4) for v in dualflow.tensor([0.0, 0.0]).log_softmax(0).tolist()]
            [-0.6931, -0.6931]
        """
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
        """``self - alpha * other``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([5.0]).sub(dualflow.tensor([1.0]), alpha=2).tolist()
            [3.0]
        """
        return ops.subtract(self, other if alpha == 1 else ops.multiply(other, alpha))

    subtract = sub

    def mul(self, other: Any) -> Any:
        """``self * other``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([2.0]).mul(3.0).tolist()
            [6.0]
        """
        return ops.multiply(self, other)

    multiply = mul

    def pow(self, exponent: Any) -> Any:
        """``self ** exponent``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([2.0, 3.0]).pow(2).tolist()
            [4.0, 9.0]
        """
        return ops.power(self, exponent)

    def maximum(self, other: Any) -> Any:
        """Elementwise maximum.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0, 4.0]).maximum(dualflow.tensor([3.0, 2.0])).tolist()
            [3.0, 4.0]
        """
        return ops.maximum(self, other)

    def minimum(self, other: Any) -> Any:
        """Elementwise minimum.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0, 4.0]).minimum(dualflow.tensor([3.0, 2.0])).tolist()
            [1.0, 2.0]
        """
        return ops.minimum(self, other)

    def addcmul(self, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Any:
        """``self + value * tensor1 * tensor2``.

        Example:
            >>> import dualflow
            >>> two, three = dualflow.tensor([2.0]), dualflow.tensor([3.0])
            >>> dualflow.tensor([1.0]).addcmul(two, three, value=0.5).tolist()
            [4.0]
        """
        return ops.add(self, ops.multiply(ops.multiply(tensor1, tensor2), value))

    def addcdiv(self, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Any:
        """``self + value * tensor1 / tensor2``.

        Example:
            >>> import dualflow
            >>> two, three = dualflow.tensor([2.0]), dualflow.tensor([3.0])
            >>> dualflow.tensor([1.0]).addcdiv(three, two).tolist()
            [2.5]
        """
        return ops.add(self, ops.multiply(ops.divide(tensor1, tensor2), value))

    def lerp(self, end: Any, weight: Any) -> Any:
        """``self + weight * (end - self)``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([0.0]).lerp(dualflow.tensor([10.0]), 0.25).tolist()
            [2.5]
        """
        return ops.add(self, ops.multiply(ops.subtract(end, self), weight))
