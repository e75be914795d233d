"""Dropout layers: ``Dropout`` (elements), ``Dropout1d/2d/3d`` (whole channels), ``AlphaDropout``.

Active when ``self.training and config.train``; masks come from the default generator of the
input's device, so ``dualflow.random.seed`` makes them reproducible (not PyTorch's stream).
"""

from __future__ import annotations

import warnings
from typing import Any

from dualflow import ops
from dualflow._config import config
from dualflow.device import device_of
from dualflow.errors import ShapeError
from dualflow.nn.module import Module
from dualflow.tensor.core import Tensor
from dualflow.tensor.random import default_generator


def _check_p(name: str, p: Any) -> float:
    if isinstance(p, bool) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{name}: dropout probability p has to be between 0 and 1, but got {p}")
    return float(p)


def feature_mask_shape(
    name: str, shape: tuple[int, ...], expected: tuple[int, ...]
) -> tuple[int, ...] | None:
    """PyTorch's feature dropout for an input of unexpected rank: a warning, then one draw per
    (sample, channel), so a 2-D (N, C) input drops elements; None for an expected rank.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     feature_mask_shape("Dropout2d", (5, 3), (3, 4))
        (5, 3)
    """
    if len(shape) in expected:
        return None
    if len(shape) < 2:
        raise ShapeError(f"{name}: feature dropout needs at least 2 dims, got shape {shape}")
    warnings.warn(
        f"{name}: received a {len(shape)}-D input, which PyTorch deprecates: dropping each "
        "(sample, channel) entry; use Dropout for elementwise dropout",
        stacklevel=5,
    )
    return shape[:2] + (1,) * (len(shape) - 2)


class Dropout(Module):
    """Zero elements with probability ``p`` and scale the rest by ``1 / (1 - p)``.

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
        self.p = _check_p(type(self).__name__, p)
        self.inplace = bool(inplace)  # accepted for compatibility; the result is always new

    def forward(self, x: Any) -> Any:
        """Apply dropout in training mode; return ``x`` itself otherwise."""
        return ops.dropout(x, self.p, train=self.training and config.train)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class _ChannelDropout(Dropout):
    """Zero whole channels (axis 1 of a batched input, axis 0 of an unbatched one)."""

    _spatial = 1

    def _mask_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        name, spatial = type(self).__name__, self._spatial
        if len(shape) == spatial + 1:  # unbatched (C, *spatial)
            return (shape[0],) + (1,) * spatial
        if len(shape) != spatial + 2:
            raise ShapeError(
                f"{name}: expected a {spatial + 1}-D (unbatched) or {spatial + 2}-D (batched) "
                f"input, got shape {shape}"
            )
        return shape[:2] + (1,) * spatial

    def forward(self, x: Any) -> Any:
        """Zero each channel of ``x`` with probability ``p``; scale the kept ones."""
        if not (self.training and config.train) or self.p == 0.0:
            return x
        if not hasattr(x, "dtype"):
            x = ops.cast(x, "float32")
        shape = self._mask_shape(tuple(x.shape))
        device = x.device if isinstance(x, Tensor) else device_of(x)
        key = default_generator(device).next_key()
        return x * ops.dropout_mask(key, shape, self.p, x.dtype)


class Dropout1d(_ChannelDropout):
    """Zero whole channels of (N, C, L) or (C, L) inputs with probability ``p``.

    Example:
        >>> import numpy as np
        >>> Dropout1d(0.5).eval()(np.ones((2, 3, 4))).shape
        (2, 3, 4)
    """

    _spatial = 1


class Dropout2d(_ChannelDropout):
    """Zero whole channels of (N, C, H, W) or (C, H, W) inputs with probability ``p``.

    A 3-D input is taken as (N, C, L) with a warning, as PyTorch does.

    Example:
        >>> import numpy as np, dualflow
        >>> dualflow.random.seed(0)
        >>> y = Dropout2d(0.5)(np.ones((1, 8, 2, 2), np.float32)).numpy()
        >>> sorted(set(y.reshape(8, 4).std(axis=1).tolist()))  # each channel all 0 or all 2
        [0.0]
    """

    _spatial = 2

    def _mask_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(shape) == 3:
            warnings.warn(
                "Dropout2d: received a 3-D input; assuming (N, C, L) and dropping channels "
                "(use Dropout1d for that)",
                stacklevel=4,
            )
            return shape[:2] + (1,)
        return feature_mask_shape(type(self).__name__, shape, (4,)) or super()._mask_shape(shape)


class Dropout3d(_ChannelDropout):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) inputs with probability ``p``.

    Example:
        >>> import numpy as np
        >>> Dropout3d(0.2)
        Dropout3d(p=0.2, inplace=False)
    """

    _spatial = 3

    def _mask_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(shape) in (4, 5) or not shape:
            return super()._mask_shape(shape)
        warnings.warn(  # PyTorch's dropout3d: any other rank is unbatched, channels on dim 0
            f"Dropout3d: received a {len(shape)}-D input; taking dim 0 as the channels",
            stacklevel=4,
        )
        return shape[:1] + (1,) * (len(shape) - 1)
