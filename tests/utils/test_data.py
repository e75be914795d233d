"""``dualflow.utils.data``: ``dualflow.data`` under PyTorch's name, with PyTorch's DataLoader
constructor (``num_workers``, ``pin_memory``...) and shuffling seeded by ``manual_seed``."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
import dualflow.utils.data
from dualflow import data
from dualflow.utils.data import DataLoader, TensorDataset


def _dataset(n: int = 10) -> TensorDataset:
    return TensorDataset(np.arange(n, dtype=np.float32), np.arange(n) % 3)


def _batches(loader: DataLoader) -> list[list[float]]:
    return [x.tolist() for x, _ in loader]


def test_torch_utils_data_names_are_dualflow_data() -> None:
    assert dualflow.utils.data.TensorDataset is data.TensorDataset
    assert dualflow.utils.data.Subset is data.Subset
    assert issubclass(DataLoader, data.DataLoader)


def test_num_workers_and_pin_memory_give_the_same_batches() -> None:
    plain = _batches(DataLoader(_dataset(), batch_size=4, shuffle=True))
    loader = DataLoader(_dataset(), batch_size=4, shuffle=True, num_workers=2, pin_memory=True)
    assert loader.prefetch == 4  # two "workers", two batches each: one prefetch thread
    assert _batches(loader) == plain and len(plain) == 3
    persistent = DataLoader(_dataset(), batch_size=4, num_workers=1, persistent_workers=True)
    assert persistent.prefetch == 2 and sum(len(b) for b in _batches(persistent)) == 10


def test_shuffle_follows_manual_seed_and_generator() -> None:
    dualflow.manual_seed(1)
    first = _batches(DataLoader(_dataset(), batch_size=10, shuffle=True))
    dualflow.manual_seed(1)
    assert _batches(DataLoader(_dataset(), batch_size=10, shuffle=True)) == first
    dualflow.manual_seed(2)
    assert _batches(DataLoader(_dataset(), batch_size=10, shuffle=True)) != first
    generator = dualflow.random.Generator(1)
    assert _batches(DataLoader(_dataset(), batch_size=10, shuffle=True, generator=generator)) == (
        first
    )
    assert _batches(DataLoader(_dataset(), batch_size=10)) == [list(map(float, range(10)))]


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"sampler": [0, 1]}, "sampler="),
        ({"batch_sampler": [[0]]}, "batch_sampler="),
        ({"timeout": 5}, "timeout="),
        ({"worker_init_fn": print}, "worker_init_fn="),
        ({"workers": 2}, "unexpected keyword argument 'workers'"),
    ],
)
def test_what_cannot_be_honoured_raises(kwargs: dict, fragment: str) -> None:
    with pytest.raises(TypeError, match=fragment):
        DataLoader(_dataset(), **kwargs)


@pytest.mark.parametrize("workers", [-1, 1.5, True])
def test_num_workers_must_be_a_count(workers: object) -> None:
    with pytest.raises(ValueError, match="num_workers must be an int >= 0"):
        DataLoader(_dataset(), num_workers=workers)


def test_default_values_of_the_unsupported_arguments_are_accepted() -> None:
    loader = DataLoader(_dataset(), 5, sampler=None, timeout=0, pin_memory_device="")
    assert [len(x) for x, _ in loader] == [5, 5]
