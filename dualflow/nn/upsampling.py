"""Resampling layers: ``Upsample`` (nearest, nearest-exact, linear, bilinear, area),
``UpsamplingNearest2d``, ``UpsamplingBilinear2d``, ``PixelShuffle`` and ``PixelUnshuffle``.

``upsample`` follows PyTorch's ``F.interpolate`` index rules exactly: nearest modes gather rows and
columns (exact), the linear modes multiply by per-axis interpolation matrices (separable, so
``A_h @ x @ A_w^T``), built in float64 from PyTorch's source-index formulas and cast to x's dtype.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dualflow import ops
from dualflow._tensor import Tensor
from dualflow.errors import ShapeError
from dualflow.nn.module import Module
from dualflow.nn.pooling1d import adaptive_matrix

_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "area")


def _source(dst: np.ndarray, size: int, out: int, scale: float | None, align: bool) -> np.ndarray:
    """PyTorch's ``area_pixel_compute_source_index`` for the linear modes."""
    if align:
        return dst * ((size - 1) / (out - 1) if out > 1 else 0.0)
    ratio = 1.0 / scale if scale else size / out
    return np.maximum(ratio * (dst + 0.5) - 0.5, 0.0)


def linear_matrix(size: int, out: int, scale: float | None, align: bool) -> np.ndarray:
    """(out, size) float64 weights of linear interpolation along one axis (PyTorch's rule).

    Example:
        >>> linear_matrix(2, 4, 2.0, False).tolist()
        [[1.0, 0.0], [0.75, 0.25], [0.25, 0.75], [0.0, 1.0]]
    """
    src = _source(np.arange(out, dtype=np.float64), size, out, scale, align)
    low = np.minimum(np.floor(src).astype(np.int64), size - 1)
    high = np.minimum(low + 1, size - 1)
    weight = src - low
    matrix = np.zeros((out, size))
    np.add.at(matrix, (np.arange(out), low), 1.0 - weight)
    np.add.at(matrix, (np.arange(out), high), weight)
    return matrix


def nearest_index(size: int, out: int, scale: float | None, exact: bool) -> np.ndarray:
    """Source index of each output position for nearest(-exact) interpolation (PyTorch's rule).

    Example:
        >>> nearest_index(3, 5, None, False).tolist(), nearest_index(3, 5, None, True).tolist()
        ([0, 0, 1, 1, 2], [0, 0, 1, 2, 2])
    """
    ratio = 1.0 / scale if scale else size / out
    dst = np.arange(out, dtype=np.float64) + (0.5 if exact else 0.0)
    return np.minimum(np.floor(dst * ratio).astype(np.int64), size - 1)


def _output_sizes(shape: tuple, size: Any, scale_factor: Any) -> tuple[list[int], list]:
    n = len(shape) - 2
    if (size is None) == (scale_factor is None):
        raise ValueError("Upsample: give exactly one of size and scale_factor")
    if size is not None:
        sizes = [int(size)] * n if isinstance(size, int) else [int(s) for s in size]
        scales: list = [None] * n
    else:
        scales = [float(scale_factor)] * n if np.ndim(scale_factor) == 0 else list(scale_factor)
        if any(s <= 0 for s in scales):
            raise ValueError(f"Upsample: scale_factor must be positive, got {scale_factor}")
        sizes = [math.floor(float(d) * s) for d, s in zip(shape[2:], scales)]
    if len(sizes) != n or min(sizes) <= 0:
        raise ShapeError(f"Upsample: output size {sizes} does not fit input shape {shape}")
    return sizes, scales


def upsample(
    x: Any,
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
) -> Tensor:
    """Resample the spatial axes of x (N, C, L) or (N, C, H, W) as ``F.interpolate`` does.

    Example:
        >>> upsample(np.array([[[1.0, 2.0]]]), scale_factor=2, mode="linear").tolist()
        [[[1.0, 1.25, 1.75, 2.0]]]
    """
    shape = tuple(x.shape)
    if len(shape) not in (3, 4):
        raise ShapeError(f"Upsample: expected a 3-D or 4-D input (N, C, ...), got {shape}")
    sizes, scales = _output_sizes(shape, size, scale_factor)
    if recompute_scale_factor:
        scales = [None] * len(sizes)
    for k, (d, out, scale) in enumerate(zip(shape[2:], sizes, scales)):
        axis = 2 + k
        if mode in ("nearest", "nearest-exact"):
            index = nearest_index(d, out, scale, mode == "nearest-exact")
            x = ops.getitem(x, (slice(None),) * axis + (index,))
            continue
        if mode == "area":
            matrix = adaptive_matrix(d, out, np.zeros(0, np.float64))
        else:
            matrix = linear_matrix(d, out, scale, bool(align_corners))
        x = _apply_axis(x, matrix, axis)
    return x


def _apply_axis(x: Any, matrix: np.ndarray, axis: int) -> Tensor:
    """Contract ``x``'s ``axis`` with ``matrix`` (out, size): the result keeps the axis order."""
    weights = matrix.astype(x.dtype)
    if isinstance(x, Tensor):
        weights = x.device.xp.asarray(weights)
    if axis == len(x.shape) - 1:
        return ops.matmul(x, ops.transpose(weights))
    return ops.matmul(weights, x)  # axis -2: (out, size) @ (..., size, W)


def _check_mode(mode: str, align_corners: bool | None) -> None:
    if mode not in _MODES:
        raise ValueError(f"Upsample: mode must be one of {_MODES}, got {mode!r}")
    if align_corners is not None and mode not in ("linear", "bilinear"):
        raise ValueError(
            "Upsample: align_corners option can only be set with the interpolating modes: "
            f"linear | bilinear (got mode {mode!r})"
        )


class Upsample(Module):
    """Upsample (N, C, L) or (N, C, H, W) inputs by ``size`` or ``scale_factor`` (PyTorch's
    ``nn.Upsample``; modes nearest, nearest-exact, linear, bilinear, area).

    Example:
        >>> up = Upsample(scale_factor=2)
        >>> up
        Upsample(scale_factor=2.0, mode='nearest')
        >>> up(np.arange(4.0).reshape(1, 1, 2, 2)).tolist()[0][0][0]
        [0.0, 0.0, 1.0, 1.0]
    """

    def __init__(
        self,
        size: Any = None,
        scale_factor: Any = None,
        mode: str = "nearest",
        align_corners: bool | None = None,
        recompute_scale_factor: bool | None = None,
    ) -> None:
        super().__init__()
        _check_mode(mode, align_corners)
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor: Any = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode, self.align_corners = mode, align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, x: Any) -> Tensor:
        """Resample ``x``."""
        return upsample(
            x, self.size, self.scale_factor, self.mode, self.align_corners,
            self.recompute_scale_factor,
        )  # fmt: skip

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            info = f"scale_factor={self.scale_factor!r}"
        else:
            info = f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """``Upsample(mode="nearest")`` for 4-D inputs.

    Example:
        >>> UpsamplingNearest2d(scale_factor=2)
        UpsamplingNearest2d(scale_factor=2.0, mode='nearest')
    """

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """``Upsample(mode="bilinear", align_corners=True)`` for 4-D inputs.

    Example:
        >>> UpsamplingBilinear2d(size=3)(np.array([[[[0.0, 2.0]]]])).tolist()
        [[[[0.0, 1.0, 2.0], [0.0, 1.0, 2.0], [0.0, 1.0, 2.0]]]]
    """

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


def _factor(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


class PixelShuffle(Module):
    """Rearrange (*, C*r², H, W) into (*, C, H*r, W*r) with ``r = upscale_factor``.

    Example:
        >>> PixelShuffle(2)(np.arange(8.0).reshape(1, 4, 1, 2)).tolist()
        [[[[0.0, 2.0, 1.0, 3.0], [4.0, 6.0, 5.0, 7.0]]]]
    """

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = _factor("PixelShuffle: upscale_factor", upscale_factor)

    def forward(self, x: Any) -> Tensor:
        """Shuffle channels of ``x`` into space."""
        r, shape = self.upscale_factor, tuple(x.shape)
        if len(shape) < 3 or shape[-3] % (r * r):
            raise ShapeError(
                f"PixelShuffle: expected (*, C*r^2, H, W) with r={r}, got shape {shape}"
            )
        lead, (c, h, w) = shape[:-3], shape[-3:]
        x = ops.reshape(x, lead + (c // (r * r), r, r, h, w))
        k = len(lead)
        x = ops.transpose(x, tuple(range(k)) + tuple(k + i for i in (0, 3, 1, 4, 2)))
        return ops.reshape(x, lead + (c // (r * r), h * r, w * r))

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """Rearrange (*, C, H*r, W*r) into (*, C*r², H, W) with ``r = downscale_factor``.

    Example:
        >>> PixelUnshuffle(2)(np.arange(4.0).reshape(1, 1, 2, 2)).tolist()
        [[[[0.0]], [[1.0]], [[2.0]], [[3.0]]]]
    """

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = _factor("PixelUnshuffle: downscale_factor", downscale_factor)

    def forward(self, x: Any) -> Tensor:
        """Fold space of ``x`` into channels."""
        r, shape = self.downscale_factor, tuple(x.shape)
        if len(shape) < 3 or shape[-2] % r or shape[-1] % r:
            raise ShapeError(
                f"PixelUnshuffle: expected (*, C, H*r, W*r) with r={r}, got shape {shape}"
            )
        lead, (c, h, w) = shape[:-3], shape[-3:]
        x = ops.reshape(x, lead + (c, h // r, r, w // r, r))
        k = len(lead)
        x = ops.transpose(x, tuple(range(k)) + tuple(k + i for i in (0, 2, 4, 1, 3)))
        return ops.reshape(x, lead + (c * r * r, h // r, w // r))

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"
