"""In-place Tensor methods (``fill_``, ``zero_``, ``add_``, ``copy_``, ``normal_``..., ``x[i] = v``)
with PyTorch's names; each computes its value with ops and writes it through ``inplace.write``.
"""

from __future__ import annotations

from typing import Any

from dualflow import ops
from dualflow.tensor.methods.inplace import arith, put, random_fill, write


class InplaceMethods:
    """Tensor methods that write into the tensor (names ending in ``_``) and ``x[i] = v``.

    Example:
        >>> import dualflow
        >>> x = dualflow.ops.zeros(3)
        >>> x.fill_(2.0).add_(dualflow.tensor([1.0, 2.0, 3.0]), alpha=2).tolist()
        [4.0, 6.0, 8.0]
        >>> x[0] = -1.0; x.tolist()
        [-1.0, 6.0, 8.0]
    """

    __slots__ = ()

    def fill_(self, value: Any) -> Any:
        """Set every element to ``value`` (a number or a one-element tensor).

        Example:
            >>> import dualflow
            >>> dualflow.ops.zeros(2).fill_(7.0).tolist()
            [7.0, 7.0]
        """
        return write(self, value, "fill_", (value,))

    def zero_(self) -> Any:
        """Set every element to zero.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0, 2.0]).zero_().tolist()
            [0.0, 0.0]
        """
        return write(self, 0, "zero_")

    def copy_(self, src: Any, non_blocking: bool = False) -> Any:
        """Copy ``src`` (broadcast, cast to this dtype) into this tensor.

        Example:
            >>> import dualflow
            >>> dualflow.ops.zeros(2).copy_(dualflow.tensor([1.0, 2.0])).tolist()
            [1.0, 2.0]
        """
        return write(self, src, "copy_", (src,))

    def add_(self, other: Any, *, alpha: Any = 1) -> Any:
        """``self += alpha * other``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0]).add_(dualflow.tensor([2.0]), alpha=3).tolist()
            [7.0]
        """
        return arith(self, "add_", lambda: self.add(other, alpha=alpha), other)

    def sub_(self, other: Any, *, alpha: Any = 1) -> Any:
        """``self -= alpha * other``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0]).sub_(0.5).tolist()
            [0.5]
        """
        return arith(self, "sub_", lambda: self.sub(other, alpha=alpha), other)

    def mul_(self, other: Any) -> Any:
        """``self *= other``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([2.0]).mul_(3.0).tolist()
            [6.0]
        """
        return arith(self, "mul_", lambda: ops.multiply(self, other), other)

    def div_(self, other: Any) -> Any:
        """``self /= other``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([3.0]).div_(2.0).tolist()
            [1.5]
        """
        return arith(self, "div_", lambda: ops.divide(self, other), other)

    def pow_(self, exponent: Any) -> Any:
        """``self **= exponent``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([3.0]).pow_(2).tolist()
            [9.0]
        """
        return arith(self, "pow_", lambda: ops.power(self, exponent), exponent)

    def remainder_(self, other: Any) -> Any:
        """``self %= other`` (Python's remainder: the sign of ``other``).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([-3.0]).remainder_(2.0).tolist()
            [1.0]
        """
        return arith(self, "remainder_", lambda: ops.remainder(self, other), other)

    def fmod_(self, other: Any) -> Any:
        """``self = fmod(self, other)`` (C's remainder: the sign of ``self``).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([-3.0]).fmod_(2.0).tolist()
            [-1.0]
        """
        return arith(self, "fmod_", lambda: ops.fmod(self, other), other)

    def floor_divide_(self, other: Any) -> Any:
        """``self //= other``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([-3, 7]).floor_divide_(2).tolist()
            [-2, 3]
        """
        return arith(self, "floor_divide_", lambda: ops.floor_divide(self, other), other)

    def addcmul_(self, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Any:
        """``self += value * tensor1 * tensor2``.

        Example:
            >>> import dualflow
            >>> two, three = dualflow.tensor([2.0]), dualflow.tensor([3.0])
            >>> dualflow.tensor([1.0]).addcmul_(two, three).tolist()
            [7.0]
        """
        compute = lambda: self.addcmul(tensor1, tensor2, value=value)  # noqa: E731
        return arith(self, "addcmul_", compute, tensor1, tensor2)

    def addcdiv_(self, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Any:
        """``self += value * tensor1 / tensor2``.

        Example:
            >>> import dualflow
            >>> two, three = dualflow.tensor([2.0]), dualflow.tensor([3.0])
            >>> dualflow.tensor([1.0]).addcdiv_(three, two).tolist()
            [2.5]
        """
        compute = lambda: self.addcdiv(tensor1, tensor2, value=value)  # noqa: E731
        return arith(self, "addcdiv_", compute, tensor1, tensor2)

    def lerp_(self, end: Any, weight: Any) -> Any:
        """``self += weight * (end - self)``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([0.0]).lerp_(dualflow.tensor([8.0]), 0.25).tolist()
            [2.0]
        """
        return arith(self, "lerp_", lambda: self.lerp(end, weight), end, weight)

    def clamp_(self, min: Any = None, max: Any = None) -> Any:
        """Clamp into ``[min, max]`` in place.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([-2.0, 3.0]).clamp_(-1.0, 1.0).tolist()
            [-1.0, 1.0]
        """
        return arith(self, "clamp_", lambda: self.clamp(min, max), min, max)

    clip_ = clamp_

    def masked_fill_(self, mask: Any, value: Any) -> Any:
        """Set the elements where ``mask`` is true to ``value``.

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([1.0, 2.0])
            >>> x.masked_fill_(x > 1.5, 0.0).tolist()
            [1.0, 0.0]
        """
        return arith(self, "masked_fill_", lambda: self.masked_fill(mask, value), value)

    def neg_(self) -> Any:
        """Negate in place.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0]).neg_().tolist()
            [-1.0]
        """
        return arith(self, "neg_", lambda: ops.negative(self))

    def abs_(self) -> Any:
        """Absolute value in place.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([-1.0]).abs_().tolist()
            [1.0]
        """
        return arith(self, "abs_", lambda: ops.abs(self))

    def sqrt_(self) -> Any:
        """Square root in place.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([4.0]).sqrt_().tolist()
            [2.0]
        """
        return arith(self, "sqrt_", lambda: ops.sqrt(self))

    def exp_(self) -> Any:
        """Exponential in place.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([0.0]).exp_().tolist()
            [1.0]
        """
        return arith(self, "exp_", lambda: ops.exp(self))

    def log_(self) -> Any:
        """Natural logarithm in place.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0]).log_().tolist()
            [0.0]
        """
        return arith(self, "log_", lambda: ops.log(self))

    def relu_(self) -> Any:
        """``max(x, 0)`` in place.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([-1.0, 2.0]).relu_().tolist()
            [0.0, 2.0]
        """
        return arith(self, "relu_", lambda: ops.relu(self))

    def sigmoid_(self) -> Any:
        """Sigmoid in place.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([0.0]).sigmoid_().tolist()
            [0.5]
        """
        return arith(self, "sigmoid_", lambda: ops.sigmoid(self))

    def tanh_(self) -> Any:
        """Tanh in place.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([0.0]).tanh_().tolist()
            [0.0]
        """
        return arith(self, "tanh_", lambda: ops.tanh(self))

    def normal_(self, mean: float = 0.0, std: float = 1.0, *, generator: Any = None) -> Any:
        """Fill with normal samples (from ``generator``, or the default one of this device).

        Example:
            >>> import dualflow
            >>> dualflow.ops.zeros(3).normal_(generator=dualflow.random.Generator(0)).shape
            (3,)
        """

        def draw(key: Any, shape: tuple, dtype: str) -> Any:
            return ops.random_normal(key, shape, mean, std, dtype)

        return random_fill(self, "normal_", draw, generator)

    def uniform_(self, *args: float, generator: Any = None, **bounds: float) -> Any:
        """Fill with uniform samples in ``[from, to)`` (default ``[0, 1)``).

        Example:
            >>> import dualflow
            >>> bool((dualflow.ops.zeros(100).uniform_(2.0, 3.0).numpy() >= 2.0).all())
            True
        """
        low, high = (list(args) + [0.0, 1.0][len(args) :])[:2]
        low, high = bounds.get("from", low), bounds.get("to", high)

        def draw(key: Any, shape: tuple, dtype: str) -> Any:
            return ops.random_uniform(key, shape, low, high, dtype)

        return random_fill(self, "uniform_", draw, generator)

    def __setitem__(self, index: Any, value: Any) -> None:
        """``x[index] = value``: an in-place write (a repeated index gets the mean of its values;
        PyTorch keeps one of them, so both agree when they are equal, as in ``x[i] += 1``)."""
        arith(self, "setitem", lambda: put(self, index, value), value)
