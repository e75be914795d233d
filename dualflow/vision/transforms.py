"""Image transforms on numpy (or cupy) arrays: resize, crops, flip, normalize, to-CHW, compose.

Spatial transforms read the image's height and width from ``axes`` (default ``(0, 1)``: HWC or
HW images; ``(-2, -1)`` for CHW or a batch). Random ones draw from a ``np.random.Generator``
(or an int seed), on the host, so the same seed gives the same crops on CPU and GPU.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dualflow import arguments
from dualflow.device import get_array_module

Size = int | tuple[int, int]
Rng = np.random.Generator | int | None


def _rng(rng: Rng) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def _hw(img: Any, axes: tuple[int, int]) -> tuple[int, int]:
    return int(img.shape[axes[0]]), int(img.shape[axes[1]])


def _pair(size: Size) -> tuple[int, int]:
    return (size, size) if isinstance(size, int) else (int(size[0]), int(size[1]))


def _slice(img: Any, axes: tuple[int, int], top: int, left: int, h: int, w: int) -> Any:
    index = [slice(None)] * img.ndim
    index[axes[0]], index[axes[1]] = slice(top, top + h), slice(left, left + w)
    return img[tuple(index)]


def _interp_matrix(n_in: int, n_out: int) -> np.ndarray:
    """Row i holds the bilinear weights of output pixel i over the input pixels (half-pixel)."""
    src = (np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5
    src = np.clip(src, 0, n_in - 1)  # edge pixels repeat, as in PyTorch/OpenCV
    lo = np.floor(src).astype(np.int64)
    hi = np.minimum(lo + 1, n_in - 1)
    frac = src - lo
    matrix = np.zeros((n_out, n_in), np.float64)
    np.add.at(matrix, (np.arange(n_out), lo), 1 - frac)
    np.add.at(matrix, (np.arange(n_out), hi), frac)
    return matrix


def _resize_axis(img: Any, matrix: np.ndarray, axis: int) -> Any:
    xp = get_array_module(img)
    out = xp.tensordot(xp.asarray(matrix, dtype=img.dtype), img, axes=([1], [axis]))
    return xp.moveaxis(out, 0, axis)


def resize(img: Any, size: Size, axes: tuple[int, int] = (0, 1)) -> Any:
    """Bilinear resize with half-pixel centres (PyTorch ``align_corners=False``, no antialias).

    Args:
        img: an image or batch (numpy or cupy); ``axes`` name its height and width axes.
        size: ``(height, width)``, or an int: the new shorter side, keeping the aspect ratio.
        axes: the height and width axes.

    Returns:
        The resized array; integer images are rounded and clipped back to their dtype.

    Example:
        >>> resize(np.array([[0.0, 1.0], [2.0, 3.0]]), (4, 4))[0]
        array([0.  , 0.25, 0.75, 1.  ])
    """
    axes = (axes[0] % img.ndim, axes[1] % img.ndim)
    h, w = _hw(img, axes)
    if isinstance(size, int):  # shorter side to `size`, as torchvision's Resize(int)
        size = (size, int(size * w / h)) if h <= w else (int(size * h / w), size)
    out_h, out_w = _pair(size)
    xp = get_array_module(img)
    work = img if img.dtype.kind == "f" else img.astype(np.float32)
    work = _resize_axis(work, _interp_matrix(h, out_h), axes[0])
    work = _resize_axis(work, _interp_matrix(w, out_w), axes[1])
    if img.dtype.kind in "iu":
        info = np.iinfo(img.dtype)
        work = xp.clip(xp.rint(work), info.min, info.max)
    return work.astype(img.dtype, copy=False)


def center_crop(img: Any, size: Size, axes: tuple[int, int] = (0, 1)) -> Any:
    """The central ``size`` window (offsets rounded as torchvision's ``center_crop``).

    Raises:
        ValueError: the crop is larger than the image.

    Example:
        >>> center_crop(np.arange(16).reshape(4, 4), 2)
        array([[ 5,  6],
               [ 9, 10]])
    """
    h, w = _hw(img, axes)
    ch, cw = _pair(size)
    if ch > h or cw > w:
        raise ValueError(f"center_crop: crop {(ch, cw)} is larger than the image {(h, w)}")
    return _slice(img, axes, round((h - ch) / 2), round((w - cw) / 2), ch, cw)


def _pad(img: Any, pad: int, axes: tuple[int, int]) -> Any:
    widths = [(0, 0)] * img.ndim
    widths[axes[0] % img.ndim] = widths[axes[1] % img.ndim] = (pad, pad)
    return get_array_module(img).pad(img, widths, mode="constant")


def random_crop(
    img: Any, size: Size, pad: int = 0, rng: Rng = None, axes: tuple[int, int] = (0, 1)
) -> Any:
    """A ``size`` window at a uniformly random offset, after zero-padding ``pad`` on each side.

    Example:
        >>> img = np.arange(16).reshape(4, 4)
        >>> bool((random_crop(img, 2, rng=0) == random_crop(img, 2, rng=0)).all())
        True
        >>> random_crop(img, 4, pad=2, rng=1).shape
        (4, 4)
    """
    if pad:
        img = _pad(img, pad, axes)
    h, w = _hw(img, axes)
    ch, cw = _pair(size)
    if ch > h or cw > w:
        raise ValueError(f"random_crop: crop {(ch, cw)} is larger than the padded image {(h, w)}")
    gen = _rng(rng)
    top, left = int(gen.integers(0, h - ch + 1)), int(gen.integers(0, w - cw + 1))
    return _slice(img, axes, top, left, ch, cw)


def hflip(img: Any, axes: tuple[int, int] = (0, 1)) -> Any:
    """Mirror left-right (reverse the width axis).

    Example:
        >>> hflip(np.array([[1, 2, 3]]))
        array([[3, 2, 1]])
    """
    return get_array_module(img).flip(img, axis=axes[1])


def random_horizontal_flip(
    img: Any, p: float = 0.5, rng: Rng = None, axes: tuple[int, int] = (0, 1)
) -> Any:
    """``hflip(img)`` with probability ``p``, else ``img`` unchanged.

    Example:
        >>> random_horizontal_flip(np.array([[1, 2]]), p=1.0)
        array([[2, 1]])
    """
    return hflip(img, axes) if _rng(rng).random() < p else img


def normalize(img: Any, mean: Sequence[float], std: Sequence[float], channel_axis: int = 0) -> Any:
    """``(img - mean) / std`` per channel (channel axis 0: CHW images, as after ``to_chw``).

    Example:
        >>> normalize(np.ones((2, 1, 1), np.float32), mean=[0.5, 1.0], std=[0.5, 2.0]).ravel()
        array([1., 0.], dtype=float32)
    """
    xp = get_array_module(img)
    shape = [1] * img.ndim
    shape[channel_axis] = -1
    dtype = img.dtype if img.dtype.kind == "f" else np.float32
    mean_a = xp.asarray(mean, dtype=dtype).reshape(shape)
    std_a = xp.asarray(std, dtype=dtype).reshape(shape)
    return (img.astype(dtype, copy=False) - mean_a) / std_a


def to_chw(img: Any, dtype: Any = np.float32) -> Any:
    """HWC (or HW) image to CHW float; uint8 pixels are scaled from 0..255 to [0, 1].

    Example:
        >>> to_chw(np.full((2, 3, 3), 255, np.uint8)).shape
        (3, 2, 3)
        >>> to_chw(np.full((1, 1), 51, np.uint8))
        array([[[0.2]]], dtype=float32)
    """
    xp = get_array_module(img)
    chw = img[None] if img.ndim == 2 else xp.moveaxis(img, -1, 0)
    out = xp.ascontiguousarray(chw).astype(dtype)
    if img.dtype == np.uint8:
        out /= out.dtype.type(255)  # a scalar: cupy refuses numpy arrays as operands
    return out


def _resized_crop_box(
    h: int, w: int, scale: tuple[float, float], ratio: tuple[float, float], gen: np.random.Generator
) -> tuple[int, int, int, int]:
    """torchvision's RandomResizedCrop.get_params: 10 tries, then a central fallback."""
    area, log_ratio = h * w, (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target = area * gen.uniform(scale[0], scale[1])
        aspect = math.exp(gen.uniform(*log_ratio))
        cw, ch = round(math.sqrt(target * aspect)), round(math.sqrt(target / aspect))
        if 0 < cw <= w and 0 < ch <= h:
            return int(gen.integers(0, h - ch + 1)), int(gen.integers(0, w - cw + 1)), ch, cw
    in_ratio = w / h
    if in_ratio < ratio[0]:
        cw, ch = w, round(w / ratio[0])
    elif in_ratio > ratio[1]:
        cw, ch = round(h * ratio[1]), h
    else:
        cw, ch = w, h
    return (h - ch) // 2, (w - cw) // 2, ch, cw


def random_resized_crop(
    img: Any,
    size: Size,
    scale: tuple[float, float] = (0.08, 1.0),
    ratio: tuple[float, float] = (3 / 4, 4 / 3),
    rng: Rng = None,
    axes: tuple[int, int] = (0, 1),
) -> Any:
    """A random window (area fraction in ``scale``, aspect in ``ratio``) resized to ``size``.

    Example:
        >>> img = np.random.default_rng(0).random((20, 30, 3))
        >>> random_resized_crop(img, 8, rng=0).shape
        (8, 8, 3)
    """
    box = _resized_crop_box(*_hw(img, axes), scale, ratio, _rng(rng))
    return resize(_slice(img, axes, *box), _pair(size), axes)


class Compose:
    """Apply transforms in order.

    Example:
        >>> Compose([ToCHW(), Normalize([0.5], [0.5])])(np.zeros((2, 2), np.uint8)).ravel()
        array([-1., -1., -1., -1.], dtype=float32)
    """

    def __init__(self, transforms: Sequence[Callable[[Any], Any]]) -> None:
        self.transforms = list(transforms)

    def __call__(self, img: Any) -> Any:
        for transform in self.transforms:
            img = transform(img)
        return img

    def __repr__(self) -> str:
        return f"Compose({self.transforms!r})"


def _check(owner: str, kwargs: dict[str, Any]) -> None:
    """ArgumentError for a transform's size, crop padding, probability or zero std."""
    if "size" in kwargs:
        arguments.integers(owner, "size", kwargs["size"], 2)
    if "pad" in kwargs:
        arguments.integer(owner, "pad", kwargs["pad"], minimum=0)
    if "p" in kwargs:
        arguments.real(owner, "p", kwargs["p"], 0.0, 1.0)
    if "std" in kwargs:
        for value in kwargs["std"]:  # every channel is divided by its std (PyTorch: no zero)
            if arguments.real(owner, "std", value) == 0.0:
                raise arguments.fail(owner, "std", kwargs["std"], "must not contain 0")


class _Transform:
    """A function with its settings bound; random ones own a Generator seeded once."""

    def __init__(self, fn: Callable[..., Any], seed: int | None = None, **kwargs: Any) -> None:
        _check(type(self).__name__, kwargs)
        self.fn, self.kwargs, self.seed = fn, kwargs, seed
        self.rng = np.random.default_rng(seed)

    def __call__(self, img: Any) -> Any:
        return self.fn(img, **self.kwargs)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items() if k != "rng")
        return f"{type(self).__name__}({args})"


class _RandomTransform(_Transform):
    def __call__(self, img: Any) -> Any:
        return self.fn(img, rng=self.rng, **self.kwargs)


class Resize(_Transform):
    """``resize`` as an object.

    Example:
        >>> Resize((2, 3))(np.zeros((4, 4))).shape
        (2, 3)
    """

    def __init__(self, size: Size, axes: tuple[int, int] = (0, 1)) -> None:
        super().__init__(resize, size=size, axes=axes)


class CenterCrop(_Transform):
    """``center_crop`` as an object.

    Example:
        >>> CenterCrop(2)(np.zeros((4, 4))).shape
        (2, 2)
    """

    def __init__(self, size: Size, axes: tuple[int, int] = (0, 1)) -> None:
        super().__init__(center_crop, size=size, axes=axes)


class RandomCrop(_RandomTransform):
    """``random_crop`` with its own Generator: ``seed`` fixes the whole sequence of crops.

    Example:
        >>> RandomCrop(4, pad=1, seed=0)(np.zeros((4, 4))).shape
        (4, 4)
    """

    def __init__(
        self, size: Size, pad: int = 0, seed: int | None = None, axes: tuple[int, int] = (0, 1)
    ) -> None:
        super().__init__(random_crop, seed, size=size, pad=pad, axes=axes)


class RandomHorizontalFlip(_RandomTransform):
    """``random_horizontal_flip`` with its own Generator.

    Example:
        >>> RandomHorizontalFlip(p=1.0, seed=0)(np.array([[1, 2]]))
        array([[2, 1]])
    """

    def __init__(self, p: float = 0.5, seed: int | None = None, axes: tuple[int, int] = (0, 1)):
        super().__init__(random_horizontal_flip, seed, p=p, axes=axes)


class RandomResizedCrop(_RandomTransform):
    """``random_resized_crop`` with its own Generator.

    Example:
        >>> RandomResizedCrop(4, seed=0)(np.zeros((10, 10, 3))).shape
        (4, 4, 3)
    """

    def __init__(
        self,
        size: Size,
        scale: tuple[float, float] = (0.08, 1.0),
        ratio: tuple[float, float] = (3 / 4, 4 / 3),
        seed: int | None = None,
        axes: tuple[int, int] = (0, 1),
    ) -> None:
        super().__init__(random_resized_crop, seed, size=size, scale=scale, ratio=ratio, axes=axes)


class Normalize(_Transform):
    """``normalize`` as an object (CHW by default).

    Example:
        >>> Normalize([1.0], [2.0])(np.full((1, 1, 1), 3.0, np.float32)).item()
        1.0
    """

    def __init__(self, mean: Sequence[float], std: Sequence[float], channel_axis: int = 0):
        super().__init__(normalize, mean=list(mean), std=list(std), channel_axis=channel_axis)


class ToCHW(_Transform):
    """``to_chw`` as an object.

    Example:
        >>> ToCHW()(np.zeros((2, 2, 3), np.uint8)).shape
        (3, 2, 2)
    """

    def __init__(self, dtype: Any = np.float32) -> None:
        super().__init__(to_chw, dtype=dtype)
