"""Layers the model zoo needs beyond ``dualflow.nn``: ``ReLU6``, a general ``AdaptiveAvgPool2d``
and ``init_weights``, torchvision's initialization of conv / batch-norm / linear layers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow import nn, ops
from dualflow.device import device_of
from dualflow.tensor.core import Tensor


class ReLU6(nn.Module):
    """``min(max(x, 0), 6)``, MobileNetV2's activation (``clip(x, 0, 6)``).

    Example:
        >>> ReLU6()([-1.0, 3.0, 9.0]).tolist()
        [0.0, 3.0, 6.0]
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = bool(inplace)  # accepted for torchvision compatibility only

    def forward(self, x: Any) -> Tensor:
        """Apply the activation."""
        return ops.clip(x, 0.0, 6.0)


def _pool_matrix(n_in: int, n_out: int, dtype: Any) -> np.ndarray:
    # PyTorch's adaptive bins: [floor(i * n_in / n_out), ceil((i + 1) * n_in / n_out)).
    matrix = np.zeros((n_out, n_in), dtype)
    for i in range(n_out):
        start, end = (i * n_in) // n_out, -(-(i + 1) * n_in // n_out)
        matrix[i, start:end] = 1.0 / (end - start)
    return matrix


class AdaptiveAvgPool2d(nn.AdaptiveAvgPool2d):
    """``nn.AdaptiveAvgPool2d`` that also takes sizes that do not divide the input (PyTorch's
    overlapping bins, as two constant matrix products), e.g. VGG's 7×7 pool of a 2×2 map.

    Example:
        >>> import numpy as np
        >>> AdaptiveAvgPool2d(3)(np.arange(4.0).reshape(1, 1, 2, 2)).shape
        (1, 1, 3, 3)
    """

    def forward(self, x: Any) -> Tensor:
        """Pool ``x`` (N, C, H, W) to (N, C, oh, ow)."""
        h, w = tuple(x.shape)[2:]
        sizes = self.output_size
        oh, ow = (sizes, sizes) if isinstance(sizes, int) else sizes
        oh, ow = h if oh is None else oh, w if ow is None else ow
        if (oh, ow) == (1, 1) or (h % oh == 0 and w % ow == 0):
            return super().forward(x)
        xp = (x.device if isinstance(x, Tensor) else device_of(x)).xp
        rows = xp.asarray(_pool_matrix(h, oh, x.dtype))
        cols = xp.asarray(_pool_matrix(w, ow, x.dtype).T)
        return ops.matmul(ops.matmul(rows, x), cols)


def init_weights(model: nn.Module, linear_std: float | None = None) -> None:
    """torchvision's init: convs kaiming_normal (fan_out, relu) with zero bias, batch norm weight
    1 and bias 0, and linear layers N(0, ``linear_std``²) with zero bias (left at PyTorch's
    default when ``linear_std`` is None, as torchvision's ResNet).

    Example:
        >>> net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2))
        >>> init_weights(net)
        >>> net[0].bias.tolist(), net[1].weight.tolist()
        ([0.0, 0.0], [1.0, 1.0])
    """
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.BatchNorm2d):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Linear) and linear_std is not None:
            nn.init.normal_(module.weight, 0.0, linear_std)
            nn.init.zeros_(module.bias)
