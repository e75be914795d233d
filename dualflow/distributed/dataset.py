"""``scatter_dataset``: one disjoint, equal-size, deterministic shard of a dataset per rank.

Every rank computes the same (seeded) permutation locally; only the dataset length travels,
to check that the ranks agree on it.
"""

from __future__ import annotations

import numpy as np

from dualflow.data import Dataset, Subset
from dualflow.distributed.communicator import Communicator
from dualflow.errors import CommunicatorError


def shard_indices(n: int, size: int, rank: int, shuffle: bool = True, seed: int = 0) -> np.ndarray:
    """Rank ``rank``'s item indices: ``n // size`` of them, from a seeded permutation.

    The last ``n % size`` items of the (shuffled) order are dropped, so shards are disjoint
    and equal (equal shards keep the ranks' step counts, hence their all-reduces, in step).

    Example:
        >>> shard_indices(7, 2, 1, shuffle=False).tolist()
        [3, 4, 5]
    """
    if n < size:
        raise ValueError(f"scatter_dataset: {n} items cannot give each of {size} ranks one")
    order = np.random.default_rng(seed).permutation(n) if shuffle else np.arange(n)
    per_rank = n // size
    return order[rank * per_rank : (rank + 1) * per_rank]


def scatter_dataset(
    dataset: Dataset, comm: Communicator, shuffle: bool = True, seed: int = 0
) -> Subset:
    """This rank's shard of ``dataset``: disjoint from the others, all of size ``len // size``.

    Truncates rather than pads: up to ``size - 1`` items (which ones depends on ``seed``) are
    left out, so no item is seen twice per epoch. Every rank must pass the same dataset.

    Raises:
        CommunicatorError: the ranks' datasets have different lengths.

    Example:
        >>> from dualflow.data import TensorDataset
        >>> from dualflow.distributed import create_communicator
        >>> shard = scatter_dataset(TensorDataset(np.arange(5)), create_communicator("loopback"))
        >>> len(shard)
        5
    """
    lengths = comm.allgather(len(dataset))
    if len(set(lengths)) > 1:
        raise CommunicatorError(
            f"scatter_dataset: the ranks' datasets have different lengths {lengths}; "
            "pass the same dataset on every rank"
        )
    return Subset(dataset, shard_indices(len(dataset), comm.size, comm.rank, shuffle, seed))
