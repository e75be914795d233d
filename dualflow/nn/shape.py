"""Layers that only pass data through or reshape it: ``Identity`` and ``Flatten``."""

from __future__ import annotations

import math
from typing import Any

from dualflow import ops
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
        self.start_dim = int(start_dim)
        self.end_dim = int(end_dim)

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
