"""The embedded 8×8 handwritten digits (1,797 images, 10 classes) with a fixed train/test split.

The data is scikit-learn's bundled copy of the UCI "Optical Recognition of Handwritten Digits"
set, stored in ``digits.npz`` next to this file by ``scripts/make_digits_npz.py`` (pixels uint8
0..16, labels uint8, and a stored stratified split: 1,438 train / 359 test images).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np

from dualflow.data.dataset import TensorDataset

DIGITS_PATH = Path(__file__).resolve().parent / "digits.npz"
SPLIT_SIZES = {"train": 1438, "test": 359, "all": 1797}
_TEST = 1  # value of the stored ``split`` array for test images


@functools.lru_cache(maxsize=1)
def _raw() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    with np.load(DIGITS_PATH, allow_pickle=False) as npz:
        return npz["images"], npz["labels"], npz["split"]


def load_digits(
    split: str = "train", dtype: Any = "float32", normalize: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Images and labels of one split of the embedded digits dataset (no download).

    The split is fixed (stored in the file): 20% of each class, chosen once with a seeded
    permutation, is the test set. Images keep the file's order within a split.

    Args:
        split: ``"train"`` (1,438 images), ``"test"`` (359) or ``"all"`` (1,797).
        dtype: dtype of the returned images.
        normalize: scale pixels from 0..16 to [0, 1]; otherwise keep the raw values.

    Returns:
        ``(images, labels)``: images of shape ``(N, 1, 8, 8)``, labels int64 in 0..9 (fresh
        arrays that the caller may modify).

    Raises:
        ValueError: an unknown ``split``.

    Example:
        >>> images, labels = load_digits("test")
        >>> images.shape, images.dtype, labels.dtype, float(images.max())
        ((359, 1, 8, 8), dtype('float32'), dtype('int64'), 1.0)
    """
    if split not in SPLIT_SIZES:
        raise ValueError(f"load_digits: split must be 'train', 'test' or 'all', got {split!r}")
    images, labels, stored = _raw()
    keep = np.ones(labels.shape, bool) if split == "all" else (stored == _TEST) == (split == "test")
    out = images[keep][:, None, :, :].astype(dtype)
    if normalize:
        out /= np.asarray(16, dtype=out.dtype)  # pixel values are 0..16 in this dataset
    return out, labels[keep].astype(np.int64)


def load_digits_dataset(
    split: str = "train", dtype: Any = "float32", normalize: bool = True
) -> TensorDataset:
    """``load_digits(split, ...)`` as a ``TensorDataset`` of ``(image, label)`` items.

    Example:
        >>> ds = load_digits_dataset("train")
        >>> len(ds), ds[0][0].shape
        (1438, (1, 8, 8))
    """
    return TensorDataset(*load_digits(split, dtype=dtype, normalize=normalize))
