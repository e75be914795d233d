"""Per-sample normalization layers: ``GroupNorm`` and ``InstanceNorm1d/2d/3d`` (PyTorch's).

Composites of mean/variance ops (biased variance, ``(x - mean) * rsqrt(var + eps)``), so they are
differentiable to any order and trace into plain graph nodes. Instance norm with
``track_running_stats`` updates its running statistics through ``ops.assign`` (state writes in a
compiled step) with the unbiased variance averaged over the batch, as PyTorch does.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from dualflow import arguments, ops
from dualflow._config import config, no_grad
from dualflow.errors import ShapeError
from dualflow.nn import init
from dualflow.nn.module import Module
from dualflow.nn.normalization import check_norm
from dualflow.tensor.core import Tensor, tensor


def _normalize(x: Any, axes: tuple[int, ...], eps: float) -> Tensor:
    mean = ops.mean(x, axis=axes, keepdims=True)
    centered = x - mean
    var = ops.mean(centered * centered, axis=axes, keepdims=True)
    return centered * ops.rsqrt(var + eps)


def _affine(y: Any, weight: Any, bias: Any, ndim: int) -> Any:
    shape = (1, -1) + (1,) * (ndim - 2)
    if weight is not None:
        y = y * ops.reshape(weight, shape)
    if bias is not None:
        y = y + ops.reshape(bias, shape)
    return y


class GroupNorm(Module):
    """Normalize (N, C, *) over groups of ``C / num_groups`` channels (and all other axes).

    Per-channel ``weight`` (1) and ``bias`` (0) when ``affine``.

    Example:
        >>> import numpy as np
        >>> gn = GroupNorm(2, 4)
        >>> gn
        GroupNorm(2, 4, eps=1e-05, affine=True)
        >>> gn(np.arange(8.0).reshape(1, 4, 2)).shape
        (1, 4, 2)
    """

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        num_groups = arguments.integer("GroupNorm", "num_groups", num_groups)
        num_channels = arguments.integer("GroupNorm", "num_channels", num_channels)
        if num_channels % num_groups:
            raise arguments.fail(
                "GroupNorm",
                "num_channels",
                num_channels,
                f"must be divisible by num_groups ({num_groups})",
            )
        self.num_groups, self.num_channels = num_groups, num_channels
        self.eps, self.affine = arguments.real("GroupNorm", "eps", eps, 0.0), bool(affine)
        if affine:
            self.weight = init.empty_parameter((num_channels,), dtype, device)
            self.bias = init.empty_parameter((num_channels,), dtype, device)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight 1, bias 0."""
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def forward(self, x: Any) -> Tensor:
        """Normalize ``x`` (N, C, *)."""
        shape = tuple(x.shape)
        if len(shape) < 2 or shape[1] != self.num_channels:
            raise ShapeError(
                f"GroupNorm: expected (N, {self.num_channels}, *) input, got shape {shape}"
            )
        grouped = ops.reshape(x, (shape[0], self.num_groups, -1))
        y = ops.reshape(_normalize(grouped, (2,), self.eps), shape)
        return _affine(y, self.weight, self.bias, len(shape))

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class _InstanceNorm(Module):
    """Shared state and forward of InstanceNorm1d/2d/3d (``_spatial`` axes per instance)."""

    _spatial = 1

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.num_features, self.eps, self.momentum = check_norm(self, num_features, eps, momentum)
        self.affine, self.track_running_stats = bool(affine), bool(track_running_stats)
        shape = (num_features,)
        for key in ("weight", "bias"):
            if affine:
                setattr(self, key, init.empty_parameter(shape, dtype, device))
            else:
                self.register_parameter(key, None)
        if track_running_stats:
            stat_dtype = np.dtype(dtype or np.float32)
            self.register_buffer("running_mean", tensor(np.zeros(shape, stat_dtype), device=device))
            self.register_buffer("running_var", tensor(np.ones(shape, stat_dtype), device=device))
            self.register_buffer("num_batches_tracked", tensor(np.array(0), device=device))
        else:
            for key in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(key, None)
        if affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def _update_stats(self, x: Any, axes: tuple[int, ...]) -> None:
        momentum = 0.0 if self.momentum is None else float(self.momentum)  # PyTorch: None -> 0
        count = math.prod(x.shape[a] for a in axes)
        with no_grad():
            mean = ops.mean(x, axis=axes)
            centered = x - ops.mean(x, axis=axes, keepdims=True)
            var = ops.sum(centered * centered, axis=axes) / max(count - 1, 1)  # unbiased
            for stat, value in ((self.running_mean, mean), (self.running_var, var)):
                batch = ops.cast(ops.mean(value, axis=0), stat.dtype)
                ops.assign(stat, stat * (1 - momentum) + batch * momentum)

    def _check(self, x: Any) -> bool:
        name, spatial, shape = type(self).__name__, self._spatial, tuple(x.shape)
        if len(shape) not in (spatial + 1, spatial + 2):
            raise ShapeError(
                f"{name}: expected {spatial + 1}D (unbatched) or {spatial + 2}D (batched) input, "
                f"got shape {shape}"
            )
        batched = len(shape) == spatial + 2
        channels = shape[1 if batched else 0]
        if channels != self.num_features:
            message = (
                f"{name}: expected input's size at dim={1 if batched else 0} to match "
                f"num_features ({self.num_features}), but got: {channels}"
            )
            if self.affine or self.track_running_stats:
                raise ShapeError(message)
            warnings.warn(message + " (num_features is unused when affine=False)", stacklevel=3)
        return batched

    def forward(self, x: Any) -> Tensor:
        """Normalize each (sample, channel) of ``x`` over its spatial axes."""
        batched = self._check(x)
        if not batched:
            x = ops.expand_dims(x, 0)
        axes = tuple(range(2, 2 + self._spatial))
        use_input_stats = (self.training and config.train) or not self.track_running_stats
        if use_input_stats:
            if self.track_running_stats:
                self._update_stats(x, axes)
            y = _normalize(x, axes, self.eps)
        else:
            shape = (1, -1) + (1,) * self._spatial
            mean = ops.reshape(self.running_mean, shape)
            y = (x - mean) * ops.rsqrt(ops.reshape(self.running_var, shape) + self.eps)
        y = _affine(y, self.weight, self.bias, len(x.shape))
        return y if batched else ops.squeeze(y, 0)

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, track_running_stats={self.track_running_stats}"
        )


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization of (N, C, L) or (C, L) inputs over L.

    Example:
        >>> import numpy as np
        >>> InstanceNorm1d(2)(np.array([[[1.0, 3.0], [2.0, 2.0]]]), ).tolist()
        [[[-0.9999950000374997, 0.9999950000374997], [0.0, 0.0]]]
    """

    _spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization of (N, C, H, W) or (C, H, W) inputs over H, W.

    Example:
        >>> import numpy as np
        >>> InstanceNorm2d(3, affine=True)
        InstanceNorm2d(3, eps=1e-05, momentum=0.1, affine=True, track_running_stats=False)
    """

    _spatial = 2


class InstanceNorm3d(_InstanceNorm):
    """Instance normalization of (N, C, D, H, W) or (C, D, H, W) inputs over D, H, W.

    Example:
        >>> import numpy as np
        >>> InstanceNorm3d(1)(np.ones((1, 1, 2, 2, 2))).shape
        (1, 1, 2, 2, 2)
    """

    _spatial = 3
