"""Datasets: the ``Dataset`` protocol, ``TensorDataset`` over arrays, ``Subset`` and splits.

A dataset is anything with ``__len__`` and ``__getitem__(int)``. Datasets that can fetch many
items at once also offer ``get_batch(indices)``, which ``DataLoader`` uses as a fast path.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from dualflow.errors import ShapeError
from dualflow.tensor.core import Tensor


@runtime_checkable
class Dataset(Protocol):
    """What a ``DataLoader`` needs: a length and integer indexing.

    Example:
        >>> isinstance([1, 2, 3], Dataset)
        True
    """

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> Any: ...


class TensorDataset:
    """Item ``i`` is the tuple ``(a[i] for a in arrays)``; arrays share their first dimension.

    Tensors are stored as their CPU numpy arrays, so items are numpy arrays or numpy scalars.

    Args:
        *arrays: numpy arrays or Tensors with equal first dimensions.

    Raises:
        ShapeError: no arrays, a 0-d array, or first dimensions that differ.

    Example:
        >>> ds = TensorDataset(np.zeros((3, 2)), np.array([0, 1, 2]))
        >>> len(ds), ds[1][1]
        (3, np.int64(1))
    """

    def __init__(self, *arrays: np.ndarray | Tensor) -> None:
        if not arrays:
            raise ShapeError("TensorDataset needs at least one array")
        self.arrays = tuple(a.numpy() if isinstance(a, Tensor) else np.asarray(a) for a in arrays)
        shapes = [a.shape for a in self.arrays]
        if any(len(s) == 0 for s in shapes) or len({s[0] for s in shapes}) != 1:
            raise ShapeError(
                f"TensorDataset: every array needs the same first dimension (the number of "
                f"items), got shapes {shapes}"
            )

    def __len__(self) -> int:
        return self.arrays[0].shape[0]

    def __getitem__(self, index: int) -> tuple[Any, ...]:
        return tuple(a[index] for a in self.arrays)

    def get_batch(self, indices: np.ndarray) -> tuple[np.ndarray, ...]:
        """All items at ``indices`` at once, already stacked (one fancy index per array).

        Example:
            >>> TensorDataset(np.arange(5)).get_batch(np.array([4, 0]))
            (array([4, 0]),)
        """
        return tuple(a[indices] for a in self.arrays)


class Subset:
    """The items of ``dataset`` at ``indices``, in that order.

    Example:
        >>> s = Subset(TensorDataset(np.arange(5)), [4, 2])
        >>> len(s), s[0]
        (2, (np.int64(4),))
    """

    def __init__(self, dataset: Dataset, indices: Sequence[int] | np.ndarray) -> None:
        self.dataset = dataset
        self.indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        n = len(dataset)
        if self.indices.size and (self.indices.min() < -n or self.indices.max() >= n):
            raise IndexError(f"Subset: indices out of range for a dataset of {n} items")

    def __len__(self) -> int:
        return int(self.indices.size)

    def __getitem__(self, index: int) -> Any:
        return self.dataset[int(self.indices[index])]

    def __getattr__(self, name: str) -> Any:
        # Expose get_batch only when the underlying dataset has it, so hasattr() stays honest.
        if name == "get_batch" and hasattr(self.dataset, "get_batch"):
            return lambda indices: self.dataset.get_batch(self.indices[indices])
        raise AttributeError(f"Subset has no attribute {name!r}")


def split_dataset(
    dataset: Dataset, sizes_or_fractions: Sequence[int | float], seed: int = 0
) -> list[Subset]:
    """Randomly split ``dataset`` into disjoint subsets that together cover it.

    Args:
        dataset: the dataset to split.
        sizes_or_fractions: item counts summing to ``len(dataset)``, or fractions summing to 1
            (rounded down; the leftover items go one each to the first subsets).
        seed: seeds the permutation, so the same seed always gives the same split.

    Returns:
        One ``Subset`` per entry of ``sizes_or_fractions``.

    Raises:
        ValueError: negative entries, or sizes/fractions that do not add up.

    Example:
        >>> train, val = split_dataset(TensorDataset(np.arange(10)), [0.8, 0.2])
        >>> len(train), len(val)
        (8, 2)
    """
    n = len(dataset)
    sizes = _resolve_sizes(list(sizes_or_fractions), n)
    order = np.random.default_rng(seed).permutation(n)
    bounds = np.cumsum([0, *sizes])
    return [Subset(dataset, order[lo:hi]) for lo, hi in itertools.pairwise(bounds)]


def _resolve_sizes(entries: list[int | float], n: int) -> list[int]:
    if not entries or any(e < 0 for e in entries):
        raise ValueError(f"split_dataset: sizes must be non-empty and >= 0, got {entries}")
    if all(isinstance(e, int | np.integer) for e in entries):
        if sum(entries) != n:
            raise ValueError(
                f"split_dataset: sizes {entries} add up to {sum(entries)}, "
                f"but the dataset has {n} items"
            )
        return [int(e) for e in entries]
    if abs(sum(entries) - 1.0) > 1e-6:
        raise ValueError(f"split_dataset: fractions {entries} must add up to 1")
    sizes = [int(np.floor(f * n)) for f in entries]
    for i in range(n - sum(sizes)):
        sizes[i % len(sizes)] += 1
    return sizes
