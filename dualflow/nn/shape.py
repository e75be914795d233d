"""Layers that only pass data through or reshape it: ``Identity``, ``Flatten``, ``Unflatten``."""

from __future__ import annotations

import math
from typing import Any

from dualflow import arguments, ops
from dualflow.errors import ShapeError
from dualflow.nn.module import Module


class Identity(Module):
    """Returns its input unchanged; any constructor arguments are ignored (as PyTorch).

    Example:
        >>> import dualflow
        >>> x = dualflow.tensor([1.0])
        >>> Identity(54, unused="x")(x) is x
        True
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, x: Any) -> Any:
        """Return ``x``."""
        return x


class Flatten(Module):
    """Collapse axes ``start_dim`` .. ``end_dim`` (inclusive) into one.

    Example:
        >>> import numpy as np
        >>> Flatten()(np.zeros((2, 3, 4, 5))).shape
        (2, 60)
        >>> Flatten(0, 1)(np.zeros((2, 3, 4))).shape
        (6, 4)
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = arguments.integer("Flatten", "start_dim", start_dim, minimum=None)
        self.end_dim = arguments.integer("Flatten", "end_dim", end_dim, minimum=None)

    def forward(self, x: Any) -> Any:
        """Reshape ``x`` so that the flattened axes become one."""
        shape = tuple(x.shape)
        ndim = max(len(shape), 1)
        start, end = self.start_dim % ndim, self.end_dim % ndim
        if not (-ndim <= self.start_dim < ndim and -ndim <= self.end_dim < ndim) or start > end:
            raise ShapeError(
                f"Flatten: start_dim={self.start_dim}, end_dim={self.end_dim} do not select a "
                f"range of axes of an input of shape {shape}"
            )
        merged = math.prod(shape[start : end + 1])
        return ops.reshape(x, shape[:start] + (merged,) + shape[end + 1 :])

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Expand axis ``dim`` into ``unflattened_size`` (one entry may be -1).

    Example:
        >>> import numpy as np
        >>> Unflatten(1, (2, 5, 5))
        Unflatten(dim=1, unflattened_size=(2, 5, 5))
        >>> Unflatten(1, (2, -1))(np.zeros((3, 8))).shape
        (3, 2, 4)
    """

    def __init__(self, dim: int, unflattened_size: tuple[int, ...] | list[int]) -> None:
        super().__init__()
        if not isinstance(unflattened_size, tuple | list):
            raise TypeError(
                "Unflatten: unflattened_size must be a tuple of ints, but found type "
                f"{type(unflattened_size).__name__}"
            )
        for index, size in enumerate(unflattened_size):
            if isinstance(size, bool) or not isinstance(size, int) or (size <= 0 and size != -1):
                raise TypeError(
                    f"Unflatten: unflattened_size must be positive ints (or one -1), got {size!r} "
                    f"at position {index}"
                )
        self.dim, self.unflattened_size = int(dim), unflattened_size

    def forward(self, x: Any) -> Any:
        """Reshape axis ``dim`` of ``x`` into ``unflattened_size``."""
        shape = tuple(x.shape)
        if not -len(shape) <= self.dim < len(shape):
            raise ShapeError(f"Unflatten: dim={self.dim} is out of range for shape {shape}")
        dim = self.dim % len(shape)
        sizes = list(self.unflattened_size)
        if -1 in sizes:
            known = math.prod(s for s in sizes if s != -1)
            sizes[sizes.index(-1)] = shape[dim] // known if known else 0
        if math.prod(sizes) != shape[dim]:
            raise ShapeError(
                f"Unflatten: unflattened_size {tuple(self.unflattened_size)} does not multiply to "
                f"the size {shape[dim]} of dim {self.dim} (input shape {shape})"
            )
        return ops.reshape(x, shape[:dim] + tuple(sizes) + shape[dim + 1 :])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
