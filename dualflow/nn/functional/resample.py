"""``nn.functional.interpolate`` (nearest, nearest-exact, linear, bilinear, trilinear, area) and
``pixel_shuffle``, with PyTorch's source-coordinate rules; ``nn.Upsample`` calls it too.

Resampling is separable, one spatial axis at a time: nearest modes gather (an integer-array
``getitem``, exact), the linear modes and ``area`` multiply by a per-axis (out, in) matrix built in
float64 from PyTorch's source-index formulas (``A_h @ x @ A_w^T``) and cast to x's dtype, so
gradients of every order come from the gather and matmul ops.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dualflow import ops
from dualflow.errors import ShapeError, with_location
from dualflow.nn.functional.spatial import bin_matrix
from dualflow.ops.validate import require_float
from dualflow.tensor.core import Tensor, as_tensor

_LINEAR = {"linear": 1, "bilinear": 2, "trilinear": 3}
MODES = ("nearest", "nearest-exact", *_LINEAR, "area")


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


def _output_sizes(shape: tuple, size: Any, scale_factor: Any, recompute: Any) -> tuple:
    """Output sizes and the scale factor per spatial axis (None: use in/out sizes), PyTorch's
    rule: a given ``scale_factor`` is used as is unless ``recompute_scale_factor``."""
    n = len(shape) - 2
    if (size is None) == (scale_factor is None):
        raise ValueError(with_location("interpolate: give exactly one of size and scale_factor"))
    if size is not None:
        sizes = [int(size)] * n if np.ndim(size) == 0 else [int(s) for s in size]
        scales: list = [None] * n
    else:
        scales = [float(scale_factor)] * n if np.ndim(scale_factor) == 0 else list(scale_factor)
        if any(s <= 0 for s in scales):
            raise ValueError(
                with_location(f"interpolate: scale_factor must be positive, got {scale_factor}")
            )
        sizes = [math.floor(float(d) * s) for d, s in zip(shape[2:], scales)]
    if len(sizes) != n or min(sizes) <= 0:
        raise ShapeError(
            with_location(f"interpolate: output size {sizes} does not fit input shape {shape}")
        )
    return sizes, ([None] * n if recompute else scales)


def _check_mode(mode: str, align_corners: bool | None, ndim: int) -> None:
    if mode not in MODES:
        raise NotImplementedError(
            with_location(f"interpolate: mode {mode!r} is not supported (use one of {MODES})")
        )
    if mode in _LINEAR and _LINEAR[mode] != ndim - 2:
        raise ShapeError(
            with_location(f"interpolate: mode {mode!r} needs a {_LINEAR[mode] + 2}-D input")
        )
    if align_corners is not None and mode not in _LINEAR:
        raise ValueError(
            with_location(
                "interpolate: align_corners option can only be set with the interpolating "
                f"modes: linear | bilinear | trilinear (got mode {mode!r})"
            )
        )


def _apply_axis(x: Any, matrix: np.ndarray, axis: int) -> Tensor:
    """Contract ``x``'s ``axis`` with ``matrix`` (out, size): the result keeps the axis order."""
    weights = x.device.xp.asarray(matrix.astype(x.dtype))
    last = x.ndim - 1
    if axis == last:
        return ops.matmul(x, ops.transpose(weights))
    if axis == last - 1:
        return ops.matmul(weights, x)  # (out, size) @ (..., size, W)
    order = list(range(x.ndim))
    order[axis], order[last - 1] = order[last - 1], order[axis]  # a swap: its own inverse
    return ops.transpose(ops.matmul(weights, ops.transpose(x, tuple(order))), tuple(order))


def interpolate(
    input: Any,
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> Tensor:
    """Resize (N, C, *spatial) to ``size`` or by ``scale_factor``; ``mode`` is ``"nearest"``,
    ``"nearest-exact"``, ``"linear"`` (3-D), ``"bilinear"`` (4-D), ``"trilinear"`` (5-D) or
    ``"area"`` (adaptive average pooling).

    Example:
        >>> x = as_tensor(np.array([[[[1.0, 2.0], [3.0, 4.0]]]], np.float32))
        >>> interpolate(x, scale_factor=2).numpy()[0, 0, 0].tolist()
        [1.0, 1.0, 2.0, 2.0]
        >>> interpolate(x, size=3, mode="bilinear", align_corners=True).numpy()[0, 0, 0].tolist()
        [1.0, 1.5, 2.0]
    """
    x = as_tensor(input)
    if x.ndim < 3:
        raise ShapeError(with_location(f"interpolate: expected (N, C, ...), got {x.shape}"))
    if antialias:
        raise NotImplementedError(with_location("interpolate: antialias is not supported"))
    _check_mode(mode, align_corners, x.ndim)
    sizes, scales = _output_sizes(x.shape, size, scale_factor, recompute_scale_factor)
    if mode not in ("nearest", "nearest-exact"):
        require_float("interpolate", x)
    for k, (n_in, n_out, scale) in enumerate(zip(x.shape[2:], sizes, scales)):
        axis = 2 + k
        if mode in ("nearest", "nearest-exact"):
            index = nearest_index(n_in, n_out, scale, mode == "nearest-exact")
            x = ops.getitem(x, (slice(None),) * axis + (index,))
        elif mode == "area":
            x = _apply_axis(x, bin_matrix(n_in, n_out, np.float64), axis)
        else:
            x = _apply_axis(x, linear_matrix(n_in, n_out, scale, bool(align_corners)), axis)
    return x


def upsample(input: Any, size: Any = None, scale_factor: Any = None, **kwargs: Any) -> Tensor:
    """The deprecated name of ``interpolate``.

    Example:
        >>> upsample(as_tensor(np.ones((1, 1, 1, 1), np.float32)), scale_factor=2).shape
        (1, 1, 2, 2)
    """
    return interpolate(input, size, scale_factor, **kwargs)


def pixel_shuffle(input: Any, upscale_factor: int) -> Tensor:
    """(N, C*r*r, H, W) -> (N, C, H*r, W*r): sub-pixel channels become spatial positions.

    Example:
        >>> pixel_shuffle(as_tensor(np.arange(4.0).reshape(1, 4, 1, 1)), 2).tolist()
        [[[[0.0, 1.0], [2.0, 3.0]]]]
    """
    x, r = as_tensor(input), int(upscale_factor)
    *lead, c, h, w = x.shape
    if c % (r * r):
        raise ShapeError(with_location(f"pixel_shuffle: {c} channels are not divisible by {r}*{r}"))
    k = len(lead)
    y = x.view(*lead, c // (r * r), r, r, h, w)
    y = y.permute(*range(k), k, k + 3, k + 1, k + 4, k + 2)
    return y.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input: Any, downscale_factor: int) -> Tensor:
    """(N, C, H*r, W*r) -> (N, C*r*r, H, W), the inverse of ``pixel_shuffle``.

    Example:
        >>> pixel_unshuffle(as_tensor(np.arange(4.0).reshape(1, 1, 2, 2)), 2).shape
        (1, 4, 1, 1)
    """
    x, r = as_tensor(input), int(downscale_factor)
    *lead, c, h, w = x.shape
    if h % r or w % r:
        raise ShapeError(with_location(f"pixel_unshuffle: {h}x{w} is not divisible by {r}"))
    k = len(lead)
    y = x.view(*lead, c, h // r, r, w // r, r)
    y = y.permute(*range(k), k, k + 2, k + 4, k + 1, k + 3)
    return y.reshape(*lead, c * r * r, h // r, w // r)
