"""Shape arguments in PyTorch's forms: ``Size`` (``torch.Size``), ``f(2, 3)``/``f((2, 3))`` shape
arguments and ``dim`` checks with PyTorch's "dimension out of range" rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from dualflow.errors import ShapeError, with_location
from dualflow.symbolic_containers import as_shape


class Size(tuple):
    """A tensor's shape, as PyTorch's ``torch.Size``: a tuple of ints with ``numel()``.

    Example:
        >>> import dualflow
        >>> s = dualflow.tensor([[1.0, 2.0, 3.0]]).size()
        >>> s, s == (1, 3), s.numel()
        (dualflow.Size([1, 3]), True, 3)
    """

    __slots__ = ()

    def numel(self) -> int:
        """The number of elements a tensor of this shape holds."""
        return math.prod(self)

    def __repr__(self) -> str:
        return f"dualflow.Size({list(self)})"


def shape_args(args: tuple, what: str = "shape") -> tuple[int, ...]:
    """``f(2, 3)``, ``f((2, 3))``, ``f([2, 3])`` and ``f(x.size())`` all mean the shape (2, 3).

    Example:
        >>> shape_args((2, 3)), shape_args(([2, 3],)), shape_args(())
        ((2, 3), (2, 3), ())
    """
    if len(args) == 1 and isinstance(args[0], Sequence):
        args = tuple(args[0])
    try:
        return as_shape(args)
    except TypeError:
        raise TypeError(with_location(f"{what} must be ints, got {args!r}")) from None


def dim_index(dim: int, ndim: int, op: str) -> int:
    """``dim`` made non-negative, or a ShapeError as PyTorch's "Dimension out of range".

    Example:
        >>> dim_index(-1, 3, "sum")
        2
    """
    span = max(ndim, 1)  # a 0-d tensor accepts dim 0 and -1, as in PyTorch
    if not -span <= dim < span:
        raise ShapeError(
            with_location(
                f"{op}: dimension out of range (expected to be in range of [{-span}, {span - 1}], "
                f"but got {dim})"
            )
        )
    return dim % span
