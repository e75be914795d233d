"""TensorDataset, Subset, split_dataset and default_collate."""

import numpy as np
import pytest

import dualflow
from dualflow.data import Dataset, Subset, TensorDataset, default_collate, split_dataset
from dualflow.errors import ShapeError


def test_tensor_dataset_items_and_tensors():
    x = dualflow.tensor(np.arange(12, dtype=np.float32).reshape(6, 2))
    ds = TensorDataset(x, np.arange(6))
    assert isinstance(ds, Dataset)
    assert len(ds) == 6
    features, label = ds[2]
    np.testing.assert_array_equal(features, [4.0, 5.0])
    assert label == 2


def test_tensor_dataset_rejects_mismatched_first_dims():
    with pytest.raises(ShapeError, match=r"\(3, 2\).*\(4,\)"):
        TensorDataset(np.zeros((3, 2)), np.zeros(4))
    with pytest.raises(ShapeError):
        TensorDataset(np.float32(1.0))
    with pytest.raises(ShapeError):
        TensorDataset()


def test_split_sizes_are_disjoint_and_cover():
    ds = TensorDataset(np.arange(103))
    parts = split_dataset(ds, [0.7, 0.2, 0.1], seed=3)
    assert [len(p) for p in parts] == [73, 20, 10]
    seen = np.concatenate([p.indices for p in parts])
    assert sorted(seen.tolist()) == list(range(103))
    again = split_dataset(ds, [0.7, 0.2, 0.1], seed=3)
    assert all(np.array_equal(a.indices, b.indices) for a, b in zip(parts, again))
    other = split_dataset(ds, [0.7, 0.2, 0.1], seed=4)
    assert not np.array_equal(parts[0].indices, other[0].indices)


def test_split_by_counts_and_bad_sizes():
    ds = TensorDataset(np.arange(10))
    a, b = split_dataset(ds, [7, 3])
    assert (len(a), len(b)) == (7, 3)
    assert set(a.indices.tolist()).isdisjoint(b.indices.tolist())
    assert a[0][0] == ds[int(a.indices[0])][0]
    with pytest.raises(ValueError, match="add up"):
        split_dataset(ds, [7, 4])
    with pytest.raises(ValueError, match="add up to 1"):
        split_dataset(ds, [0.5, 0.2])
    with pytest.raises(ValueError):
        split_dataset(ds, [11, -1])


def test_subset_get_batch_only_when_underlying_has_it():
    assert hasattr(Subset(TensorDataset(np.arange(4)), [3, 1]), "get_batch")
    assert not hasattr(Subset(list(range(4)), [3, 1]), "get_batch")
    (batch,) = Subset(TensorDataset(np.arange(4)), [3, 1, 0]).get_batch(np.array([0, 2]))
    np.testing.assert_array_equal(batch, [3, 0])
    with pytest.raises(IndexError):
        Subset(list(range(4)), [4])


def test_collate_tuples_keep_dtypes():
    samples = [(np.full((2,), i, np.float32), i, float(i)) for i in range(3)]
    x, y, z = default_collate(samples)
    assert isinstance(x, dualflow.Tensor)
    assert x.shape == (3, 2) and x.dtype == np.float32
    assert y.dtype == np.int64 and y.tolist() == [0, 1, 2]
    assert z.dtype == np.float32
    labels = default_collate([np.uint8(1), np.uint8(7)])
    assert labels.dtype == np.uint8


def test_collate_dicts_lists_and_strings():
    samples = [{"image": np.ones((1, 2)), "label": 3, "name": "a", "pair": [1, 2.5]}] * 2
    batch = default_collate(samples)
    assert set(batch) == {"image", "label", "name", "pair"}
    assert batch["image"].shape == (2, 1, 2)
    assert batch["label"].tolist() == [3, 3]
    assert batch["name"] == ["a", "a"]
    assert isinstance(batch["pair"], list) and batch["pair"][1].tolist() == [2.5, 2.5]


def test_collate_rejects_unstackable_and_mixed():
    with pytest.raises(TypeError, match="collate_fn"):
        default_collate([None, None])
    with pytest.raises(TypeError, match="mix"):
        default_collate([(1,), {"a": 1}])
    with pytest.raises(TypeError, match="keys"):
        default_collate([{"a": 1}, {"b": 1}])
