"""``dualflow.utils.data``: ``dualflow.data`` under PyTorch's name ``torch.utils.data``.

The datasets are ``dualflow.data``'s own objects; ``DataLoader`` is ``dualflow.data.DataLoader``
with PyTorch's constructor (``num_workers=``, ``pin_memory=``...), so a PyTorch script's loader
line ports unchanged. Its shuffling is seeded by ``dualflow.manual_seed``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dualflow import data as _data
from dualflow.data import *  # noqa: F403 - every name of dualflow.data, under torch's name
from dualflow.tensor.random import initial_seed

# PyTorch DataLoader arguments dualflow cannot honour -> their default (anything else raises)
_UNSUPPORTED = {
    "sampler": (None, "use shuffle=True/False, or index the dataset with data.Subset"),
    "batch_sampler": (None, "use batch_size, shuffle and drop_last"),
    "timeout": (0, "batches are loaded in this process (or one prefetch thread): no timeout"),
    "worker_init_fn": (None, "there are no worker processes (num_workers prefetches in a thread)"),
    "multiprocessing_context": (None, "there are no worker processes"),
    "pin_memory_device": ("", "host memory is not pinned; move batches with x.to(device)"),
}


class DataLoader(_data.DataLoader):
    """``dualflow.data.DataLoader`` with ``torch.utils.data.DataLoader``'s arguments.

    ``num_workers=n > 0`` loads ``n * prefetch_factor`` batches ahead in one background thread
    (the batches and their order are the same as with 0); ``pin_memory`` and
    ``persistent_workers`` change nothing (there is no pinned memory and no worker process).
    The shuffle order of epoch ``e`` is a function of ``(seed, e)``, where ``seed`` is the
    ``generator``'s seed, else the one ``dualflow.manual_seed`` last set: PyTorch draws it from
    the global generator instead, so the orders differ from PyTorch's.

    Raises:
        TypeError: ``sampler``, ``batch_sampler``, ``timeout``, ``worker_init_fn``,
            ``multiprocessing_context`` or ``pin_memory_device`` given a non-default value.

    Example:
        >>> import numpy as np
        >>> loader = DataLoader(_data.TensorDataset(np.arange(5)), batch_size=2, num_workers=1)
        >>> [b.tolist() for (b,) in loader]
        [[0, 1], [2, 3], [4]]
    """

    def __init__(
        self,
        dataset: _data.Dataset,
        batch_size: int = 1,
        shuffle: bool | None = None,
        num_workers: int = 0,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        generator: Any = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        **unsupported: Any,
    ) -> None:
        for name, value in unsupported.items():
            default, hint = _UNSUPPORTED.get(name, (None, None))
            if hint is None:
                raise TypeError(f"DataLoader() got an unexpected keyword argument {name!r}")
            if value != default:
                raise TypeError(f"DataLoader: {name}={value!r} is not supported; {hint}")
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"DataLoader: num_workers must be an int >= 0, got {num_workers!r}")
        seed = initial_seed() if generator is None else int(generator.state.tolist()[0])
        prefetch = num_workers * (2 if prefetch_factor is None else prefetch_factor)
        super().__init__(
            dataset,
            batch_size=batch_size,
            shuffle=bool(shuffle),
            drop_last=drop_last,
            seed=seed,
            collate_fn=collate_fn,
            prefetch=prefetch,
        )


__all__ = list(_data.__all__)  # DataLoader is the one defined above
