"""Normalization layers: ``BatchNorm1d``, ``BatchNorm2d`` and ``LayerNorm`` (PyTorch semantics).

Batch norm trains on batch statistics when ``self.training and config.train``, updating the
running statistics (and ``num_batches_tracked``) through ``ops.assign`` so a compiled step records
them as state updates; otherwise it normalizes with the running statistics.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow import arguments, ops
from dualflow._config import config, no_grad
from dualflow.device import device_of
from dualflow.errors import ShapeError
from dualflow.nn import init
from dualflow.nn.module import Module
from dualflow.tensor.core import Tensor, tensor


def _constant(like: Any, shape: tuple[int, ...], value: float) -> Any:
    # A constant gamma/beta for layers without affine parameters, on x's device and dtype.
    device = like.device if isinstance(like, Tensor) else device_of(like)
    return device.xp.full(shape, value, like.dtype)


def check_norm(layer: Module, num_features: Any, eps: Any, momentum: Any) -> tuple:
    """(num_features, eps, momentum) of a batch/instance norm, checked: a size >= 1, a finite
    eps >= 0 (a negative eps makes the root of a negative variance: NaN), momentum in [0, 1] or
    None (outside it the running statistics leave the range of the batch statistics)."""
    name = type(layer).__name__
    num_features = arguments.integer(name, "num_features", num_features)
    eps = arguments.real(name, "eps", eps, 0.0)
    if momentum is not None:
        momentum = arguments.real(name, "momentum", momentum, 0.0, 1.0)
    return num_features, eps, momentum


class _BatchNorm(Module):
    """Shared state and forward of BatchNorm1d/2d; subclasses only say which ranks they take."""

    _ranks: tuple[int, ...] = ()

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device: Any = None,
        dtype: Any = None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__()
        self.num_features, self.eps, self.momentum = check_norm(self, num_features, eps, momentum)
        self.affine, self.track_running_stats = bool(affine), bool(track_running_stats)
        shape = (self.num_features,)
        self.weight = init.empty_parameter(shape, dtype, device) if affine else None
        self.bias = init.empty_parameter(shape, dtype, device) if affine and bias else None
        if track_running_stats:
            stat_dtype = np.dtype(dtype or np.float32)
            for name in ("running_mean", "running_var"):
                self.register_buffer(name, tensor(np.zeros(shape, stat_dtype), device=device))
            self.register_buffer(
                "num_batches_tracked", tensor(np.array(0, np.int64), device=device)
            )
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        """Running mean 0, running variance 1, ``num_batches_tracked`` 0."""
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self) -> None:
        """Reset the running statistics; weight 1 and bias 0 (PyTorch's default)."""
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def _check_input(self, x: Any) -> None:
        shape = tuple(x.shape)
        if len(shape) not in self._ranks:
            ranks = " or ".join(f"{r}D" for r in self._ranks)
            raise ShapeError(f"{type(self).__name__}: expected {ranks} input (got shape {shape})")
        if shape[1] != self.num_features:
            raise ShapeError(
                f"{type(self).__name__}: input has {shape[1]} channels (axis 1) but the layer was "
                f"built for num_features={self.num_features}"
            )

    def _momentum(self) -> float:
        # Counts the batch and returns the averaging factor (1/n for momentum=None, as PyTorch).
        with no_grad():
            ops.assign(self.num_batches_tracked, self.num_batches_tracked + 1)
        if self.momentum is None:  # reads the count: a guard when compiled
            return 1.0 / int(self.num_batches_tracked.item())
        return float(self.momentum)

    def forward(self, x: Any) -> Tensor:
        """Normalize ``x`` (N, C, ...) per channel (axis 1)."""
        self._check_input(x)
        training = self.training and config.train
        update = training and self.track_running_stats
        momentum = self._momentum() if update else 0.0
        gamma, beta, shape = self.weight, self.bias, (self.num_features,)
        gamma = _constant(x, shape, 1.0) if gamma is None else gamma
        beta = _constant(x, shape, 0.0) if beta is None else beta
        # Batch statistics in training, and always when no running statistics are kept.
        use_batch = training or not self.track_running_stats
        stats = (self.running_mean, self.running_var) if self.track_running_stats else (None,) * 2
        return ops.batch_norm(
            x, gamma, beta, *stats, train=use_batch, momentum=momentum, eps=self.eps
        )

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, bias={self.bias is not None}, "
            f"track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalization of (N, C) or (N, C, L) inputs over all axes but 1.

    Args:
        num_features: C.
        eps: added to the variance for stability.
        momentum: running-statistics factor, or None for a cumulative average.
        affine: learn a per-channel weight (init 1) and bias (init 0).
        bias: with ``affine``, whether to learn the bias (keyword-only, as PyTorch 2.13).
        track_running_stats: keep running statistics (used in eval mode).
        device: where the parameters and buffers live.
        dtype: their dtype (float32 by default).

    Example:
        >>> import dualflow
        >>> bn = BatchNorm1d(2)
        >>> _ = bn(dualflow.tensor([[1.0, 2.0], [3.0, 6.0]]))
        >>> bn.running_mean.tolist(), int(bn.num_batches_tracked)
        ([0.20000000298023224, 0.4000000059604645], 1)
    """

    _ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization of (N, C, H, W) inputs per channel; arguments as ``BatchNorm1d``.

    Example:
        >>> import numpy as np
        >>> bn = BatchNorm2d(3).eval()
        >>> bn
        BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)
        >>> bn(np.ones((2, 3, 4, 4), np.float32)).shape
        (2, 3, 4, 4)
    """

    _ranks = (4,)


class LayerNorm(Module):
    """Normalize over the trailing ``normalized_shape`` axes; weight 1 and bias 0 by default.

    Example:
        >>> import dualflow
        >>> ln = LayerNorm(2, eps=0.0)
        >>> ln
        LayerNorm((2,), eps=0.0, elementwise_affine=True, bias=True)
        >>> ln(dualflow.tensor([[1.0, 3.0]])).tolist()
        [[-1.0, 1.0]]
    """

    def __init__(
        self,
        normalized_shape: int | tuple[int, ...],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        shape = normalized_shape
        count = (
            1 if isinstance(shape, int) else len(shape) if isinstance(shape, list | tuple) else 0
        )
        if not count:
            raise arguments.fail("LayerNorm", "normalized_shape", shape, "must be an int or ints")
        self.normalized_shape = arguments.integers("LayerNorm", "normalized_shape", shape, count)
        self.eps = arguments.real("LayerNorm", "eps", eps, 0.0)
        self.elementwise_affine = bool(elementwise_affine)
        shape = self.normalized_shape
        self.weight = init.empty_parameter(shape, dtype, device) if elementwise_affine else None
        has_bias = elementwise_affine and bias
        self.bias = init.empty_parameter(shape, dtype, device) if has_bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight 1, bias 0."""
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, x: Any) -> Tensor:
        """Normalize ``x`` (..., *normalized_shape)."""
        gamma = self.weight if self.weight is not None else _constant(x, self.normalized_shape, 1)
        beta = self.bias if self.bias is not None else _constant(x, self.normalized_shape, 0)
        return ops.layer_norm(x, gamma, beta, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, "
            f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}"
        )
