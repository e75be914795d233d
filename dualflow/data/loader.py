"""``DataLoader``: seeded, resumable mini-batch iteration over a dataset, with optional prefetch.

The order of epoch ``e`` depends only on ``(seed, e)``, and the loader counts the batches it has
handed out, so ``state_dict()`` taken mid-epoch restores to exactly the remaining batches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from dualflow import arguments
from dualflow.data.collate import default_collate
from dualflow.data.dataset import Dataset
from dualflow.data.prefetch import Prefetcher
from dualflow.errors import ShapeError, user_frame, with_location
from dualflow.tensor.core import Tensor

_STATE_KEYS = ("epoch", "position", "seed")


class DataLoader:
    """Iterate ``dataset`` in batches; each ``iter()`` runs (the rest of) one epoch.

    Batches come from ``collate_fn(list_of_samples)``; the default stacks samples into dualflow
    Tensors keeping tuples/dicts (integer labels stay integer tensors). An epoch stopped early
    (``break``) is resumed by the next ``iter()``; ``set_epoch(e)`` starts epoch ``e`` afresh.
    Only one iterator per loader is active: starting a new one makes the older one stale.

    Args:
        dataset: anything with ``__len__`` and ``__getitem__`` (and optionally ``get_batch``).
        batch_size: samples per batch (>= 1).
        shuffle: draw a new permutation every epoch, from ``np.random.default_rng([seed, epoch])``.
        drop_last: skip the last batch of an epoch when it is smaller than ``batch_size``.
        seed: non-negative int; the same seed gives the same order in every run.
        collate_fn: turns a list of samples into a batch (default: ``default_collate``).
        prefetch: if > 0, load up to this many batches ahead in a background thread.

    Example:
        >>> from dualflow.data import TensorDataset
        >>> ds = TensorDataset(np.arange(10, dtype=np.float32), np.arange(10) % 2)
        >>> loader = DataLoader(ds, batch_size=4, shuffle=True, seed=1)
        >>> len(loader), [x.shape for x, y in loader]
        (3, [(4,), (4,), (2,)])
    """

    def __init__(
        self,
        dataset: Dataset,
        batch_size: int = 1,
        shuffle: bool = False,
        drop_last: bool = False,
        seed: int = 0,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        prefetch: int = 0,
    ) -> None:
        if not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")):
            raise arguments.fail("DataLoader", "dataset", dataset, "needs __len__ and __getitem__")
        self.dataset = dataset
        self.batch_size = arguments.integer("DataLoader", "batch_size", batch_size)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.seed = arguments.integer("DataLoader", "seed", seed, minimum=0)
        self.collate_fn = arguments.function("DataLoader", "collate_fn", collate_fn)
        self.prefetch = arguments.integer("DataLoader", "prefetch", prefetch, minimum=0)
        self._epoch = 0
        self._position = 0
        self._generation = 0  # bumped by every iter(), so older iterators know they are stale

    def __len__(self) -> int:
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    @property
    def epoch(self) -> int:
        """The epoch the next batch belongs to.

        Example:
            >>> loader = DataLoader(list(range(4)), batch_size=2)
            >>> _ = list(loader); loader.epoch
            1
        """
        self._roll_over()
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch`` from its first batch on the next ``iter()``.

        Example:
            >>> loader = DataLoader(list(range(4)), batch_size=2, shuffle=True)
            >>> first = [b.tolist() for b in loader]
            >>> loader.set_epoch(0); [b.tolist() for b in loader] == first
            True
        """
        _check_count("epoch", epoch, minimum=0)
        self._epoch, self._position = epoch, 0
        self._generation += 1

    def epoch_indices(self, epoch: int) -> np.ndarray:
        """The sample order of ``epoch`` (before batching); depends only on seed and epoch.

        Example:
            >>> DataLoader(list(range(5))).epoch_indices(0)
            array([0, 1, 2, 3, 4])
        """
        n = len(self.dataset)
        if not self.shuffle:
            return np.arange(n)
        return np.random.default_rng([self.seed, epoch]).permutation(n)

    def batch_indices(self, epoch: int) -> list[np.ndarray]:
        """The sample indices of every batch of ``epoch``, in order.

        Example:
            >>> DataLoader(list(range(5)), batch_size=2).batch_indices(0)
            [array([0, 1]), array([2, 3]), array([4])]
        """
        order = self.epoch_indices(epoch)
        return [
            order[i : i + self.batch_size]
            for i in range(0, len(self) * self.batch_size, self.batch_size)
        ]

    def __iter__(self) -> Iterator[Any]:
        self._roll_over()
        self._generation += 1
        return self._run(self._generation, self._epoch, self._position)

    def _run(self, generation: int, epoch: int, start: int) -> Iterator[Any]:
        pending = self.batch_indices(epoch)[start:]
        prefetcher = Prefetcher(map(self._fetch, pending), self.prefetch) if self.prefetch else None
        batches = iter(prefetcher) if prefetcher is not None else map(self._fetch, pending)
        try:
            for batch in batches:
                self._check_current(generation)
                # Count before yielding: a consumer that stops here has still received it.
                self._position += 1
                yield batch
            self._check_current(generation)
            self._epoch, self._position = epoch + 1, 0
        except ShapeError as exc:  # raised while fetching (maybe in the prefetch thread)
            if "\n  at " in str(exc):  # located already (e.g. in the user's collate_fn)
                raise
            raise ShapeError(with_location(str(exc), user_frame())) from exc
        finally:
            if prefetcher is not None:
                prefetcher.close()

    def _check_current(self, generation: int) -> None:
        if generation != self._generation:
            raise RuntimeError(
                "DataLoader: this iterator is stale (the loader was iterated again, restored "
                "or set_epoch() was called since it started); use the newest iterator"
            )

    def _fetch(self, indices: np.ndarray) -> Any:
        if self.collate_fn is None and hasattr(self.dataset, "get_batch"):
            # Same result as collating item by item, with one fancy index per array.
            return tuple(Tensor(a) for a in self.dataset.get_batch(indices))
        samples = [self.dataset[int(i)] for i in indices]
        try:
            return (self.collate_fn or default_collate)(samples)
        except ShapeError as exc:  # say which dataset items; the user's line is added by _run
            shown = indices.tolist() if len(indices) <= 8 else [*indices[:8].tolist(), "..."]
            raise ShapeError(f"DataLoader: batch of dataset items {shown}: {exc}") from exc

    def _roll_over(self) -> None:
        # A consumer that took every batch but never asked for the next one ends the epoch here.
        if self._position >= len(self) > 0:
            self._epoch, self._position = self._epoch + 1, 0

    # ----- resuming ------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, int]:
        """``{epoch, position, seed}``: position counts batches already handed out this epoch.

        Example:
            >>> loader = DataLoader(list(range(6)), batch_size=2)
            >>> it = iter(loader); _ = next(it)
            >>> loader.state_dict()
            {'epoch': 0, 'position': 1, 'seed': 0}
        """
        self._roll_over()
        return {"epoch": self._epoch, "position": self._position, "seed": self.seed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Resume from ``state``: the next ``iter()`` yields the rest of that epoch, in order.

        Raises:
            KeyError: a key is missing.
            ValueError: a value is negative, not an int, or the position is past the epoch.

        Example:
            >>> loader = DataLoader(list(range(6)), batch_size=2)
            >>> loader.load_state_dict({"epoch": 0, "position": 2, "seed": 0})
            >>> [b.tolist() for b in loader]
            [[4, 5]]
        """
        missing = [k for k in _STATE_KEYS if k not in state]
        if missing:
            raise KeyError(f"DataLoader.load_state_dict: missing keys {missing}")
        values = {k: _to_int(k, state[k]) for k in _STATE_KEYS}
        if values["position"] > len(self):
            raise ValueError(
                f"DataLoader.load_state_dict: position {values['position']} is past the end of "
                f"an epoch of {len(self)} batches (was the dataset or batch size changed?)"
            )
        self.seed = values["seed"]
        self._epoch, self._position = values["epoch"], values["position"]
        self._generation += 1


def _to_int(name: str, value: Any) -> int:
    # Loaded checkpoints hand back numpy scalars or 0-d arrays as often as Python ints.
    if isinstance(value, Tensor):
        value = value.item()
    if isinstance(value, np.ndarray | np.generic):
        value = value.item()
    _check_count(name, value, minimum=0)
    return int(value)


def _check_count(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"DataLoader: {name} must be an int >= {minimum}, got {value!r}")


__all__ = ["DataLoader"]
