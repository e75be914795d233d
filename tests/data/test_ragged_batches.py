"""A ragged batch (samples of different shapes) is a ShapeError naming the shapes, the dataset
items and the user's line (issue 19), with and without prefetching; it was numpy's bare
``ValueError: all input arrays must have the same shape``."""

from __future__ import annotations

import os

import numpy as np
import pytest

from dualflow.data import DataLoader
from dualflow.errors import ShapeError

HERE = os.path.abspath(__file__)


def _consume(loader: DataLoader) -> None:
    for _ in loader:
        pass


@pytest.mark.parametrize("prefetch", [0, 2])
def test_ragged_batch_names_shapes_items_and_line(prefetch: int) -> None:
    samples = [np.zeros(3, np.float32), np.zeros(3, np.float32), np.zeros(4, np.float32)]
    loader = DataLoader(samples, batch_size=3, prefetch=prefetch)
    with pytest.raises(ShapeError) as info:
        _consume(loader)
    message = str(info.value)
    assert message.startswith("DataLoader: batch of dataset items [0, 1, 2]: default_collate:")
    assert "sample 0 has shape (3,) and sample 2 has shape (4,)" in message
    assert message.endswith(f"at {HERE}:{_consume.__code__.co_firstlineno + 1}"), message


def test_ragged_fields_of_tuples_are_named_too() -> None:
    samples = [(np.zeros((2, 2)), 0), (np.zeros((2, 3)), 1)]
    with pytest.raises(ShapeError, match=r"sample 0 has shape \(2, 2\) and sample 1 has shape"):
        next(iter(DataLoader(samples, batch_size=2)))
