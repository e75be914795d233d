"""``nn.functional.interpolate`` (nearest, nearest-exact, linear, bilinear, trilinear) and
``pixel_shuffle``, with PyTorch's source-coordinate rules.

Resampling is separable: each spatial axis in turn is an integer-array ``getitem`` (nearest)
or two of them blended by constant weights (linear), so gradients come from the gather ops.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dualflow import ops
from dualflow._tensor import Tensor, as_tensor
from dualflow.errors import ShapeError, with_location

_LINEAR = {"linear": 1, "bilinear": 2, "trilinear": 3}


def _sizes(x: Any, size: Any, scale_factor: Any, recompute: bool | None) -> tuple[list, list]:
    """Output sizes, and the input/output coordinate scale per spatial axis (PyTorch's rule:
    a given ``scale_factor`` is used as is unless ``recompute_scale_factor``)."""
    spatial = list(x.shape[2:])
    k = len(spatial)
    if (size is None) == (scale_factor is None):
        raise ValueError(with_location("interpolate: give exactly one of size and scale_factor"))
    if size is not None:
        out = [int(size)] * k if isinstance(size, int) else [int(s) for s in size]
        return out, [n / o for n, o in zip(spatial, out)]
    factors = [float(scale_factor)] * k if np.ndim(scale_factor) == 0 else list(scale_factor)
    out = [math.floor(n * f) for n, f in zip(spatial, factors)]
    if recompute:
        return out, [n / o for n, o in zip(spatial, out)]
    return out, [1.0 / f for f in factors]


def _take(x: Any, axis: int, rows: np.ndarray) -> Any:
    return ops.getitem(x, (slice(None),) * axis + (rows,))


def _nearest(x: Any, axis: int, n_out: int, scale: float, exact: bool) -> Any:
    n_in = x.shape[axis]
    dst = np.arange(n_out, dtype=np.float64)
    src = np.floor((dst + 0.5) * scale) if exact else np.floor(dst * scale)
    return _take(x, axis, np.minimum(src.astype(np.int64), n_in - 1))


def _linear(x: Any, axis: int, n_out: int, scale: float, align_corners: bool) -> Any:
    n_in = x.shape[axis]
    dst = np.arange(n_out, dtype=np.float64)
    if align_corners:
        src = dst * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
    else:
        src = np.maximum((dst + 0.5) * scale - 0.5, 0.0)
    low = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    high = np.minimum(low + 1, n_in - 1)
    shape = [1] * x.ndim
    shape[axis] = n_out
    weight = ((src - low).astype(x.dtype)).reshape(shape)
    lo, hi = _take(x, axis, low), _take(x, axis, high)
    return lo + (hi - lo) * weight


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
    ``"nearest-exact"``, ``"linear"`` (3-D), ``"bilinear"`` (4-D) or ``"trilinear"`` (5-D).

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
    linear = mode in _LINEAR
    if linear and _LINEAR[mode] != x.ndim - 2:
        raise ShapeError(
            with_location(f"interpolate: mode {mode!r} needs a {_LINEAR[mode] + 2}-D input")
        )
    if not linear and mode not in ("nearest", "nearest-exact"):
        raise NotImplementedError(with_location(f"interpolate: mode {mode!r} is not supported"))
    if align_corners is not None and not linear:
        raise ValueError("align_corners option can only be set with the interpolating modes")
    out, scales = _sizes(x, size, scale_factor, recompute_scale_factor)
    for i, (n_out, scale) in enumerate(zip(out, scales)):
        if linear:
            x = _linear(x, 2 + i, n_out, scale, bool(align_corners))
        else:
            x = _nearest(x, 2 + i, n_out, scale, mode == "nearest-exact")
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
