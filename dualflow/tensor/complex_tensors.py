"""Complex tensors as PyTorch programs use them: ``torch.view_as_complex``, ``view_as_real``,
``torch.polar``, ``torch.complex`` and elementwise arithmetic (rotary embeddings, spectra).

A ``ComplexTensor`` holds its real view, a real tensor of shape ``(*shape, 2)`` (real and
imaginary parts last, as ``view_as_real`` shows them), and computes with real ops on it: so the
results are PyTorch's, gradients of real losses equal PyTorch's (they flow through the real
view), and everything compiles as ordinary ops. Its ``dtype`` is ``complex64`` over float32 parts
(``complex128`` over float64); ``numpy()`` gives the complex array. Covered: ``+ - * /`` with
complex or real operands, ``abs``, ``angle``, ``real``/``imag``, ``conj``, ``exp``, ``sum``,
reshaping (``view``/``reshape``/``unsqueeze``/``flatten``), indexing. Unlike PyTorch,
``view_as_complex`` and ``view_as_real`` return new tensors (their writes are not shared).

Example:
    >>> import dualflow
    >>> z = dualflow.view_as_complex(dualflow.tensor([[1.0, 2.0], [0.0, 1.0]]))
    >>> (z * z).numpy().tolist(), dualflow.view_as_real(z.conj()).tolist()
    ([(-3+4j), (-1+0j)], [[1.0, -2.0], [0.0, -1.0]])
"""

from __future__ import annotations

import builtins
import dataclasses
from typing import Any

import numpy as np

from dualflow import ops
from dualflow.errors import DTypeError, ShapeError, with_location
from dualflow.ops.autocast import float32_inputs
from dualflow.tensor.core import Tensor, as_tensor
from dualflow.tensor.methods.layout import Reflected

_COMPLEX = {
    np.dtype(np.float32): np.dtype(np.complex64),
    np.dtype(np.float64): np.dtype(np.complex128),
}


def _parts(value: Any, like: Tensor) -> tuple[Any, Any]:
    """The real and imaginary parts of an operand (a real operand has a zero imaginary part)."""
    if isinstance(value, ComplexTensor):
        return value.real, value.imag
    if isinstance(value, builtins.complex):
        return value.real, value.imag
    return value, None


@dataclasses.dataclass(eq=False, repr=False)
class ComplexTensor(Reflected):
    """A complex tensor computed through its real view (see the module docstring).

    Example:
        >>> import dualflow
        >>> z = dualflow.complex(dualflow.tensor([3.0]), dualflow.tensor([4.0]))
        >>> z.abs().tolist(), z.dtype
        ([5.0], dtype('complex64'))
    """

    # A dataclass of one field, so compiled functions take and return it as a container of
    # its real view (tracer/pytree.py), never as an opaque object baked into the plan.
    _pair: Tensor
    is_sparse = False

    # ----- attributes --------------------------------------------------------------------------
    shape = property(lambda self: tuple(self._pair.shape[:-1]))
    ndim = property(lambda self: self._pair.ndim - 1)
    dtype = property(lambda self: _COMPLEX[np.dtype(self._pair.dtype)])
    device = property(lambda self: self._pair.device)
    requires_grad = property(lambda self: self._pair.requires_grad)
    real = property(lambda self: self._pair[..., 0])
    imag = property(lambda self: self._pair[..., 1])

    def size(self, dim: int | None = None) -> Any:
        """The shape, or its size along ``dim``."""
        return self.shape if dim is None else self.shape[dim]

    def dim(self) -> int:
        """The number of dimensions."""
        return self.ndim

    def is_complex(self) -> bool:
        """True."""
        return True

    def numpy(self) -> np.ndarray:
        """The complex values as a numpy array."""
        pair = self._pair.numpy()
        return (pair[..., 0] + 1j * pair[..., 1]).astype(self.dtype)

    def detach(self) -> ComplexTensor:
        """The same values without history."""
        return ComplexTensor(self._pair.detach())

    def tolist(self) -> list:
        """The values as (nested) Python complex numbers."""
        return self.numpy().tolist()

    # ----- arithmetic --------------------------------------------------------------------------
    def _make(self, re: Any, im: Any) -> ComplexTensor:
        re = ops.cast(re, self._pair.dtype) if hasattr(re, "shape") else re
        im = ops.cast(im, self._pair.dtype) if hasattr(im, "shape") else im
        shape = np.broadcast_shapes(np.shape(re), np.shape(im))
        return ComplexTensor(
            ops.stack([ops.broadcast_to(re, shape), ops.broadcast_to(im, shape)], axis=-1)
        )

    def __add__(self, other: Any) -> ComplexTensor:
        re, im = _parts(other, self._pair)
        return self._make(self.real + re, self.imag if im is None else self.imag + im)

    __radd__ = __add__

    def __sub__(self, other: Any) -> ComplexTensor:
        re, im = _parts(other, self._pair)
        return self._make(self.real - re, self.imag if im is None else self.imag - im)

    def __rsub__(self, other: Any) -> ComplexTensor:
        return -self + other

    def __neg__(self) -> ComplexTensor:
        return ComplexTensor(-self._pair)

    def __mul__(self, other: Any) -> ComplexTensor:
        re, im = _parts(other, self._pair)
        a, b = self.real, self.imag
        if im is None:
            return self._make(a * re, b * re)
        return self._make(a * re - b * im, a * im + b * re)

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> ComplexTensor:
        re, im = _parts(other, self._pair)
        if im is None:
            return self._make(self.real / re, self.imag / re)
        return self * _conj_parts(re, im, self)

    def __rtruediv__(self, other: Any) -> ComplexTensor:
        return self.reciprocal() * other

    def reciprocal(self) -> ComplexTensor:
        """``1 / z``."""
        return _conj_parts(self.real, self.imag, self)

    def conj(self) -> ComplexTensor:
        """The complex conjugate."""
        return self._make(self.real, -self.imag)

    def abs(self) -> Tensor:
        """``|z|`` (a real tensor)."""
        return ops.sqrt(self.real * self.real + self.imag * self.imag)

    def angle(self) -> Tensor:
        """The argument ``atan2(imag, real)`` (a real tensor)."""
        return _atan2(self.imag, self.real)

    def exp(self) -> ComplexTensor:
        """``exp(z) = exp(re) * (cos(im) + i sin(im))``."""
        scale = ops.exp(self.real)
        return self._make(scale * ops.cos(self.imag), scale * ops.sin(self.imag))

    def sum(self, dim: Any = None, keepdim: bool = False) -> ComplexTensor:
        """The sum over ``dim`` (all dimensions when None)."""
        axes = tuple(range(self.ndim)) if dim is None else dim
        axes = tuple(a % self.ndim for a in (axes if isinstance(axes, tuple | list) else (axes,)))
        return ComplexTensor(ops.sum(self._pair, axes, keepdim))

    # ----- shape -------------------------------------------------------------------------------
    def reshape(self, *shape: Any) -> ComplexTensor:
        """The same values in ``shape`` (one ``-1`` allowed)."""
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], tuple | list) else shape
        return ComplexTensor(ops.reshape(self._pair, tuple(int(n) for n in shape) + (2,)))

    view = reshape

    def unsqueeze(self, dim: int) -> ComplexTensor:
        """A new size-1 dimension at ``dim``."""
        return ComplexTensor(ops.expand_dims(self._pair, dim % (self.ndim + 1)))

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> ComplexTensor:
        """Dimensions ``start_dim..end_dim`` merged into one."""
        n = max(self.ndim, 1)
        start, end = start_dim % n, end_dim % n
        merged = int(np.prod(self.shape[start : end + 1]))
        return self.reshape(self.shape[:start] + (merged,) + self.shape[end + 1 :])

    def __getitem__(self, index: Any) -> ComplexTensor:
        items = index if isinstance(index, tuple) else (index,)
        if Ellipsis not in items:
            items = items + (Ellipsis,)
        return ComplexTensor(self._pair[items + (slice(None),)])

    def __repr__(self) -> str:
        return f"tensor({self.numpy()!r}, dtype={self.dtype})"


def _conj_parts(re: Any, im: Any, like: ComplexTensor) -> ComplexTensor:
    """``1 / (re + i im) = (re - i im) / (re² + im²)``."""
    norm = re * re + im * im
    return like._make(re / norm, -im / norm)


def _atan2(y: Tensor, x: Tensor) -> Tensor:
    """``atan2`` from ``atan`` (the quadrant from the signs), zero at the origin as numpy's."""
    safe = ops.where(ops.equal(x, 0), ops.ones((), x.dtype), x)
    base = ops.atan(y / safe)
    half_turn = ops.where(ops.less(y, 0), -np.pi, np.pi)
    left = ops.where(ops.less(x, 0), base + half_turn, base)
    axis = ops.where(ops.greater(y, 0), np.pi / 2, ops.where(ops.less(y, 0), -np.pi / 2, 0.0))
    return ops.cast(ops.where(ops.equal(x, 0), axis, left), x.dtype)


def view_as_complex(input: Any) -> ComplexTensor:
    """A complex tensor from a real one whose last dimension (of size 2) holds the real and
    imaginary parts.

    Example:
        >>> view_as_complex(as_tensor(np.array([[1.0, -1.0]], np.float32))).numpy().tolist()
        [(1-1j)]
    """
    input = as_tensor(input)
    if input.ndim == 0 or input.shape[-1] != 2:
        raise ShapeError(
            with_location(
                "view_as_complex: Tensor must have a last dimension of size 2, got "
                f"{tuple(input.shape)}"
            )
        )
    if np.dtype(input.dtype) not in _COMPLEX:
        raise DTypeError(
            with_location(f"view_as_complex: expects float32 or float64, got {input.dtype}")
        )
    return ComplexTensor(input)


def view_as_real(input: Any) -> Tensor:
    """The real view of a complex tensor: shape ``(*shape, 2)``, real and imaginary parts.

    Example:
        >>> view_as_real(complex(as_tensor([1.0]), as_tensor([2.0]))).tolist()
        [[1.0, 2.0]]
    """
    if not isinstance(input, ComplexTensor):
        raise DTypeError(with_location("view_as_real is only supported for complex tensors"))
    return input._pair


def complex(real: Any, imag: Any) -> ComplexTensor:
    """The complex tensor ``real + i * imag`` (same float dtypes, broadcast).

    Example:
        >>> complex(as_tensor([1.0]), as_tensor([0.5])).numpy().tolist()
        [(1+0.5j)]
    """
    real, imag = as_tensor(real), as_tensor(imag)
    if real.dtype != imag.dtype or np.dtype(real.dtype) not in _COMPLEX:
        raise DTypeError(
            with_location(
                f"complex: expects equal float32/float64 parts, got {real.dtype} and {imag.dtype}"
            )
        )
    shape = np.broadcast_shapes(real.shape, imag.shape)
    return ComplexTensor(
        ops.stack([ops.broadcast_to(real, shape), ops.broadcast_to(imag, shape)], axis=-1)
    )


def polar(abs: Any, angle: Any) -> ComplexTensor:
    """The complex tensor ``abs * (cos(angle) + i sin(angle))``.

    Example:
        >>> z = polar(as_tensor([2.0]), as_tensor([0.0])); z.numpy().tolist()
        [(2+0j)]
    """
    # on PyTorch's autocast float32 list (16-bit parts make no complex type)
    abs, angle = float32_inputs(as_tensor(abs), as_tensor(angle))
    return complex(abs * ops.cos(angle), abs * ops.sin(angle))


def is_complex(input: Any) -> bool:
    """Whether ``input`` is a complex tensor (``torch.is_complex``).

    Example:
        >>> is_complex(complex(as_tensor([1.0]), as_tensor([0.0]))), is_complex(as_tensor([1.0]))
        (True, False)
    """
    return isinstance(input, ComplexTensor)
