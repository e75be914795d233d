"""Image grids and image files from tensors: ``make_grid`` and ``save_image`` (torchvision's).

Visualization helpers, computed on the host with numpy (no gradient, as torchvision's
``@torch.no_grad`` versions); inside a compiled function they fail closed like any raw read.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dualflow.errors import ShapeError
from dualflow.tensor.core import Tensor, tensor


def _host(images: Any) -> np.ndarray:
    if isinstance(images, list | tuple):
        return np.stack([_host(t) for t in images], axis=0)
    if isinstance(images, Tensor):
        return np.asarray(images.numpy())
    return np.asarray(images)


def _as_batch(x: np.ndarray) -> np.ndarray:
    """(B, C, H, W) with single-channel images repeated to 3 channels (torchvision's rule)."""
    if x.ndim == 2:
        x = x[None]
    if x.ndim == 3:
        if x.shape[0] == 1:
            x = np.concatenate([x, x, x], axis=0)
        x = x[None]
    if x.ndim != 4:
        raise ShapeError(f"make_grid: expected (B, C, H, W), (C, H, W) or (H, W), got {x.shape}")
    if x.shape[1] == 1:
        x = np.concatenate([x, x, x], axis=1)
    return x


def _normalize(x: np.ndarray, value_range: Any, scale_each: bool) -> np.ndarray:
    if value_range is not None and not isinstance(value_range, tuple):
        raise TypeError("value_range has to be a tuple (min, max) if specified")

    def norm(img: np.ndarray) -> np.ndarray:
        low, high = value_range if value_range is not None else (img.min(), img.max())
        low, high = float(low), float(high)
        img = np.clip(img, low, high)
        return ((img - low) / max(high - low, 1e-5)).astype(img.dtype)

    return np.stack([norm(img) for img in x]) if scale_each else norm(x)


def make_grid(
    tensor_or_list: Any,
    nrow: int = 8,
    padding: int = 2,
    normalize: bool = False,
    value_range: tuple[float, float] | None = None,
    scale_each: bool = False,
    pad_value: float = 0.0,
) -> Tensor:
    """Tile a batch of images (B, C, H, W) into one (C, H', W') image, ``nrow`` per row.

    ``normalize`` maps ``value_range`` (default: the min and max) to [0, 1], per image with
    ``scale_each``; gaps of ``padding`` pixels are filled with ``pad_value``.

    Example:
        >>> grid = make_grid(np.ones((3, 1, 2, 2), np.float32), nrow=2, padding=1)
        >>> grid.shape, grid.numpy()[0].tolist()[1]
        ((3, 7, 7), [0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0])
    """
    x = _as_batch(_host(tensor_or_list))
    if normalize:
        x = _normalize(x.copy(), value_range, scale_each)
    if x.shape[0] == 1:
        return tensor(x[0])
    count, channels, h, w = x.shape
    columns = min(nrow, count)
    rows = math.ceil(count / columns)
    height, width = h + padding, w + padding
    grid = np.full((channels, height * rows + padding, width * columns + padding), pad_value,
                   dtype=x.dtype)  # fmt: skip
    for k in range(count):
        top, left = (k // columns) * height + padding, (k % columns) * width + padding
        grid[:, top : top + h, left : left + w] = x[k]
    return tensor(grid)


def save_image(tensor_or_list: Any, fp: Any, format: str | None = None, **kwargs: Any) -> None:
    """Write ``make_grid(tensor_or_list, **kwargs)`` as an 8-bit image file (needs Pillow).

    Values in [0, 1] map to 0..255 with rounding (``x * 255 + 0.5``, clamped), as torchvision.

    Example:
        >>> import io
        >>> buffer = io.BytesIO()
        >>> save_image(np.zeros((2, 3, 4, 4), np.float32), buffer, format="png")
        >>> buffer.getvalue()[:4]
        b'\\x89PNG'
    """
    try:
        from PIL import Image  # noqa: PLC0415 - optional dependency (the vision/dev extras)
    except ImportError as exc:  # pragma: no cover - Pillow is in the dev extra
        raise ImportError("save_image needs Pillow: pip install 'dualflow[vision]'") from exc
    grid = make_grid(tensor_or_list, **kwargs).numpy()
    pixels = np.clip(grid * 255 + 0.5, 0, 255).astype(np.uint8).transpose(1, 2, 0)
    Image.fromarray(pixels).save(fp, format=format)
