"""PyTorch tensor names that ports use and that are composites of existing ops: ``tan``,
``arctan``/``atan``, ``atan2``, ``outer``, ``select``, ``diag``, ``eye`` and
``set_grad_enabled`` (function forms), the Tensor methods of those and of ``ported_random``
(``multinomial``, ``random_``), the device flags ``is_xpu``/``is_mps``/``is_meta`` and a 0-d
tensor's ``format``.

Each is written over ``dualflow.ops`` (no new primitive), so its backward comes from the ops it
uses and it traces like any other op sequence inside ``@dualflow.compile``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dualflow import ops
from dualflow._config import config
from dualflow.symbolic_containers import as_size
from dualflow.tensor.methods.ported_random import (
    constant_like,
    fill_integers,
    multinomial,
    shape_error,
    to_tensor,
)


def atan2(input: Any, other: Any) -> Any:
    """The angle of the point (``other``, ``input``) in (-pi, pi]: PyTorch's ``atan2(y, x)``.

    A composite of ``atan`` on the smaller of |y/x| and |x/y| (so no division by zero); the
    gradient is ``(x, -y) / (x² + y²)``, and 0 at the origin, as PyTorch's.

    Example:
        >>> import dualflow
        >>> [round(v, 4) for v in atan2(dualflow.tensor([1.0, -1.0, 0.0]),
        ...                             dualflow.tensor([-1.0, 0.0, 2.0])).tolist()]
        [2.3562, -1.5708, 0.0]
    """
    y, x = to_tensor(input), to_tensor(other)
    y, x = y + x * 0, x + y * 0  # broadcast both to the result's shape and dtype
    steep = ops.greater(ops.abs(y), ops.abs(x))
    numerator, denominator = ops.where(steep, x, y), ops.where(steep, y, x)
    origin = ops.equal(denominator, 0)  # only at x = y = 0: angle 0, gradient 0 as PyTorch
    safe = ops.where(origin, constant_like(1.0, x), denominator)
    base = ops.atan(ops.where(origin, constant_like(0.0, x), numerator) / safe)
    upper = ops.greater_equal(y, 0)
    half = ops.where(upper, constant_like(math.pi / 2, x), constant_like(-math.pi / 2, x))
    turn = ops.where(upper, constant_like(math.pi, x), constant_like(-math.pi, x))
    flat = ops.where(ops.less(x, 0), base + turn, base)
    return ops.where(steep, half - base, flat)


def outer(input: Any, vec2: Any) -> Any:
    """The outer product of two 1-D tensors: ``out[i, j] = input[i] * vec2[j]``.

    Example:
        >>> import dualflow
        >>> outer(dualflow.tensor([1.0, 2.0]), dualflow.tensor([3.0, 4.0, 5.0])).tolist()
        [[3.0, 4.0, 5.0], [6.0, 8.0, 10.0]]
    """
    a, b = to_tensor(input), to_tensor(vec2)
    if a.ndim != 1 or b.ndim != 1:
        raise shape_error(f"outer: expected two 1-D tensors, got shapes {a.shape} and {b.shape}")
    return a.reshape(-1, 1) * b.reshape(1, -1)


def select(input: Any, dim: int, index: int) -> Any:
    """The slice at ``index`` along ``dim`` (that dim removed): ``x.select(1, 0)`` is
    ``x[:, 0]``.

    Example:
        >>> import dualflow
        >>> select(dualflow.tensor([[1.0, 2.0], [3.0, 4.0]]), 1, -1).tolist()
        [2.0, 4.0]
    """
    x = to_tensor(input)
    if not -x.ndim <= dim < max(x.ndim, 1):
        raise IndexError(f"select: dim {dim} out of range for a {x.ndim}-D tensor")
    dim %= x.ndim
    size = x.shape[dim]
    if not -size <= index < size:
        raise IndexError(f"select: index {index} out of range for dim {dim} of size {size}")
    return x[(slice(None),) * dim + (int(index),)]


def diag(input: Any, diagonal: int = 0) -> Any:
    """A 1-D input as the ``diagonal``-th diagonal of a square matrix; a 2-D input's
    ``diagonal``-th diagonal as a 1-D tensor (above the main one for ``diagonal > 0``).

    Example:
        >>> import dualflow
        >>> diag(dualflow.tensor([1.0, 2.0]), 1).tolist()
        [[0.0, 1.0, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]]
        >>> diag(dualflow.tensor([[1.0, 2.0], [3.0, 4.0]]), -1).tolist()
        [3.0]
    """
    x, k = to_tensor(input), int(diagonal)
    if x.ndim == 1:
        n = x.shape[0] + abs(k)
        values = ops.pad(x, ((0, abs(k)),))  # row i holds x[i] (k >= 0); column j, x[j] (k < 0)
        values = values.reshape(n, 1) if k >= 0 else values.reshape(1, n)
        rows = ops.arange(0, n, 1, np.int64, x.device).reshape(n, 1)
        cols = ops.arange(0, n, 1, np.int64, x.device).reshape(1, n)
        return ops.where(ops.equal(cols - rows, k), values, constant_like(0, values))
    if x.ndim != 2:
        raise shape_error(f"diag: expected a 1-D or 2-D tensor, got shape {x.shape}")
    row0, col0 = max(-k, 0), max(k, 0)
    length = max(0, min(x.shape[0] - row0, x.shape[1] - col0))
    steps = np.arange(length)
    return ops.getitem(x, (steps + row0, steps + col0))


def eye(
    n: int,
    m: int | None = None,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Any:
    """The ``n`` x ``m`` identity matrix (``m = n`` by default), float32 unless ``dtype``.

    Example:
        >>> eye(2, 3).tolist()
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    """
    from dualflow.tensor.factories import finish  # noqa: PLC0415 - factories imports the Tensor

    n, m = as_size(n), as_size(n if m is None else m)  # sizes from shapes stay expressions
    rows = ops.arange(0, n, 1, np.int64, device).reshape(n, 1)
    cols = ops.arange(0, m, 1, np.int64, device).reshape(1, m)
    out = ops.cast(ops.equal(rows, cols), np.dtype(dtype or np.float32))
    return finish(out, requires_grad)


class set_grad_enabled:  # PyTorch's name; a class, so it is also a context manager
    """Turn gradient recording on or off: at once as a call, for a block as a context
    manager (restored on exit), or for a function as a decorator, as PyTorch.

    Example:
        >>> import dualflow
        >>> with set_grad_enabled(False):
        ...     dualflow.is_grad_enabled()
        False
        >>> dualflow.is_grad_enabled()
        True
    """

    def __init__(self, mode: bool) -> None:
        self.previous = config.grad_enabled
        self.mode = bool(mode)
        config.grad_enabled = self.mode

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        config.grad_enabled = self.previous

    def __call__(self, function: Callable[..., Any]) -> Callable[..., Any]:
        config.grad_enabled = self.previous  # as a decorator, the mode holds inside calls only

        @functools.wraps(function)
        def run(*args: Any, **kwargs: Any) -> Any:
            with set_grad_enabled(self.mode):
                return function(*args, **kwargs)

        return run


class PortedMethods:
    """The Tensor method forms of this module's functions, and ``random_``.

    Example:
        >>> import dualflow
        >>> x = dualflow.tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> x.diag().tolist(), x.select(0, 1).tolist(), x.is_mps
        ([1.0, 4.0], [3.0, 4.0], False)
    """

    __slots__ = ()

    def tan(self) -> Any:
        """Tangent (``sin / cos``).

        Example:
            >>> import dualflow
            >>> [round(v, 4) for v in dualflow.tensor([0.0, 1.0]).tan().tolist()]
            [0.0, 1.5574]
        """
        return ops.sin(self) / ops.cos(self)

    def arctan(self) -> Any:
        """Arctangent in (-pi/2, pi/2) (``atan`` is the same method).

        Example:
            >>> import dualflow
            >>> round(dualflow.tensor(1.0).arctan().item(), 4)
            0.7854
        """
        return ops.atan(self)

    atan = arctan

    def atan2(self, other: Any) -> Any:
        """``atan2(self, other)``: the angle of the point (other, self) (``arctan2`` too).

        Example:
            >>> import dualflow
            >>> round(dualflow.tensor(1.0).atan2(dualflow.tensor(-1.0)).item(), 4)
            2.3562
        """
        return atan2(self, other)

    arctan2 = atan2

    def outer(self, vec2: Any) -> Any:
        """Outer product with the 1-D ``vec2``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0, 2.0]).outer(dualflow.tensor([1.0, -1.0])).tolist()
            [[1.0, -1.0], [2.0, -2.0]]
        """
        return outer(self, vec2)

    def select(self, dim: int, index: int) -> Any:
        """The slice at ``index`` along ``dim`` (that dim removed).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([[1.0, 2.0], [3.0, 4.0]]).select(1, 0).tolist()
            [1.0, 3.0]
        """
        return select(self, dim, index)

    def diag(self, diagonal: int = 0) -> Any:
        """Vector -> diagonal matrix, matrix -> its diagonal (see ``dualflow.diag``).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([1.0, 2.0]).diag().tolist()
            [[1.0, 0.0], [0.0, 2.0]]
        """
        return diag(self, diagonal)

    def multinomial(
        self, num_samples: int, replacement: bool = False, *, generator: Any = None
    ) -> Any:  # the function lives in ported_random.py
        """Category indices drawn with the last dim's weights (``dualflow.multinomial``).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([[0.0, 5.0]]).multinomial(3, replacement=True).tolist()
            [[1, 1, 1]]
        """
        return multinomial(self, num_samples, replacement, generator=generator)

    def random_(self, *args: int, generator: Any = None, **bounds: int) -> Any:
        """Fill with integers uniform in ``[from, to)``: ``random_(to)``, ``random_(from, to)``;
        ``random_()`` draws from ``[0, 2**mantissa]`` (floats) or the dtype's range.

        Example:
            >>> import dualflow
            >>> sorted(set(dualflow.ops.zeros(200).random_(3, 5).tolist()))
            [3.0, 4.0]
        """
        return fill_integers(self, args, bounds, generator)

    def __format__(self, spec: str) -> str:
        """A 0-d tensor formats as its value (``f"{loss:.4f}"``), as PyTorch; others as text.

        Example:
            >>> import dualflow
            >>> f"{dualflow.tensor(0.12345):.2f} {dualflow.tensor(3)}"
            '0.12 3'
        """
        if self.ndim == 0:
            return format(self.item(), spec)
        return object.__format__(self, spec)

    @property
    def is_xpu(self) -> bool:
        """False (and so ``is_mps``, ``is_meta``): dualflow runs on CPU and CUDA only.

        Example:
            >>> import dualflow
            >>> dualflow.ones(1).is_xpu, dualflow.ones(1).is_meta
            (False, False)
        """
        return False

    is_mps = is_xpu
    is_meta = is_xpu


NAMES = ("atan2", "arctan2", "outer", "select", "diag", "eye", "set_grad_enabled", "tan")
NAMES += ("arctan", "atan")


def tan(input: Any) -> Any:
    """``torch.tan``: the tangent.

    Example:
        >>> round(tan(0.5).item(), 4)
        0.5463
    """
    return PortedMethods.tan(to_tensor(input))


def arctan(input: Any) -> Any:
    """``torch.arctan`` (``torch.atan``): the arctangent.

    Example:
        >>> round(arctan(1.0).item(), 4)
        0.7854
    """
    return ops.atan(to_tensor(input))


atan = arctan
arctan2 = atan2
