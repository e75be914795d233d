"""Division with rounding, PyTorch's names and operators: ``%``, ``//``, ``remainder``, ``fmod``,
``floor_divide`` and ``div(rounding_mode=)``.

Each is one ``dualflow.ops`` call (``remainder``, ``fmod``, ``floor_divide``: numpy's ufuncs, so
dtypes promote as numpy's do and integer division by zero gives 0 with a warning where PyTorch
raises) or a short composite of them (``rounding_mode="trunc"``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow import ops
from dualflow.errors import with_location
from dualflow.tensor.methods.layout import Reflected


def _floats(x: Any, other: Any) -> bool:
    """Whether ``x / other`` is computed in floats (numpy's promotion of the two)."""
    kinds = [
        np.dtype(v.dtype).kind if hasattr(v, "dtype") else type(v).__name__ for v in (x, other)
    ]
    return any(k in ("f", "c", "float") for k in kinds)


def trunc_divide(x: Any, other: Any) -> Any:
    """``x / other`` rounded toward zero (integers stay integers), as PyTorch's
    ``div(x, other, rounding_mode="trunc")``; its gradient is 0 as PyTorch's.

    Example:
        >>> import dualflow
        >>> trunc_divide(dualflow.tensor([7.0, -7.0]), 2.0).tolist()
        [3.0, -3.0]
        >>> trunc_divide(dualflow.tensor([7, -7]), 2).tolist()
        [3, -3]
    """
    if not _floats(x, other):  # x - fmod(x, y) is a multiple of y: floor division is exact
        return ops.floor_divide(ops.subtract(x, ops.fmod(x, other)), other)
    quotient = ops.divide(x, other)
    # q - fmod(q, 1) is trunc(q) exactly for finite q; infinities (division by 0) stay themselves
    whole = ops.subtract(quotient, ops.fmod(quotient, 1.0))
    return ops.where(ops.equal(ops.abs(quotient), np.inf), quotient, whole)


class DivisionMethods:
    """``%``, ``//``, ``remainder``, ``fmod``, ``floor_divide`` and ``div``."""

    __slots__ = ()

    def __mod__(self, other: Any) -> Any:
        if isinstance(other, Reflected):
            return NotImplemented
        return ops.remainder(self, other)

    def __rmod__(self, other: Any) -> Any:
        return ops.remainder(other, self)

    def __floordiv__(self, other: Any) -> Any:
        if isinstance(other, Reflected):
            return NotImplemented
        return ops.floor_divide(self, other)

    def __rfloordiv__(self, other: Any) -> Any:
        return ops.floor_divide(other, self)

    def remainder(self, other: Any) -> Any:
        """Python's ``self % other``: the result has the sign of ``other``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([-3.0, 3.0]).remainder(2.0).tolist()
            [1.0, 1.0]
        """
        return ops.remainder(self, other)

    def fmod(self, other: Any) -> Any:
        """C's ``fmod``: the result has the sign of ``self``.

        Example:
            >>> import dualflow
            >>> dualflow.tensor([-3.0, 3.0]).fmod(2.0).tolist()
            [-1.0, 1.0]
        """
        return ops.fmod(self, other)

    def floor_divide(self, other: Any) -> Any:
        """Python's ``self // other``: the quotient rounded down (no gradient).

        Example:
            >>> import dualflow
            >>> dualflow.tensor([-3, 3]).floor_divide(2).tolist()
            [-2, 1]
        """
        return ops.floor_divide(self, other)

    def div(self, other: Any, *, rounding_mode: str | None = None) -> Any:
        """``self / other``; ``rounding_mode`` ``"floor"`` or ``"trunc"`` rounds the quotient
        (integers then stay integers, as in PyTorch).

        Example:
            >>> import dualflow
            >>> x = dualflow.tensor([3.0, -3.0])
            >>> x.div(2.0).tolist(), x.div(2.0, rounding_mode="floor").tolist()
            ([1.5, -1.5], [1.0, -2.0])
        """
        if rounding_mode is None:
            return ops.divide(self, other)
        if rounding_mode == "floor":
            return ops.floor_divide(self, other)
        if rounding_mode == "trunc":
            return trunc_divide(self, other)
        raise ValueError(
            with_location(
                f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                f"{rounding_mode!r}"
            )
        )

    divide = true_divide = div
