"""``Dropout``: zero each element with probability ``p`` while training, identity otherwise."""

from __future__ import annotations

from typing import Any

from dualflow import ops
from dualflow._config import config
from dualflow.nn.module import Module


class Dropout(Module):
    """Zero elements with probability ``p`` and scale the rest by ``1 / (1 - p)``.

    Active when ``self.training and config.train``; the masks come from the default generator
    of the input's device, so ``dualflow.random.seed`` makes them reproducible.

    Example:
        >>> import dualflow
        >>> drop = Dropout(0.5)
        >>> drop
        Dropout(p=0.5, inplace=False)
        >>> x = dualflow.tensor([1.0, 2.0])
        >>> drop.eval()(x) is x
        True
    """

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = float(p)
        self.inplace = bool(inplace)  # accepted for compatibility; the result is always new

    def forward(self, x: Any) -> Any:
        """Apply dropout in training mode; return ``x`` itself otherwise."""
        return ops.dropout(x, self.p, train=self.training and config.train)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"
