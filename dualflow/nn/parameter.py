"""``Parameter``: a leaf Tensor that always requires grad and that a Module registers as such."""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.tensor.core import Tensor


class Parameter(Tensor):
    """A trainable tensor; assigning one to a Module attribute registers it.

    Example:
        >>> import numpy as np
        >>> p = Parameter(np.zeros((2, 3), np.float32))
        >>> p.requires_grad, p.shape
        (True, (2, 3))
    """

    __slots__ = ()

    def __init__(self, data: Any, name: str | None = None) -> None:
        array = data.raw_array if isinstance(data, Tensor) else data
        if not hasattr(array, "dtype"):
            array = np.asarray(array, dtype=np.float32)
        super().__init__(array, requires_grad=True, name=name)

    def __repr__(self) -> str:
        return f"Parameter(shape={self.shape}, dtype={self.dtype})"
