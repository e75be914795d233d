"""The embedded digits dataset: shapes, classes, fixed split sizes and no train/test overlap."""

import subprocess
import sys

import numpy as np
import pytest

from dualflow.data import load_digits, load_digits_dataset
from dualflow.data.digits import DIGITS_PATH


def test_file_is_small_and_shipped_next_to_the_module():
    assert DIGITS_PATH.is_file()
    assert DIGITS_PATH.stat().st_size < 100_000


@pytest.mark.parametrize(("split", "n"), [("train", 1438), ("test", 359), ("all", 1797)])
def test_shapes_dtypes_and_range(split, n):
    images, labels = load_digits(split)
    assert images.shape == (n, 1, 8, 8) and images.dtype == np.float32
    assert labels.shape == (n,) and labels.dtype == np.int64
    assert images.min() == 0.0 and images.max() == 1.0
    assert sorted(np.unique(labels).tolist()) == list(range(10))


def test_split_is_stratified_and_disjoint():
    all_images, all_labels = load_digits("all", normalize=False, dtype=np.uint8)
    train_images, _ = load_digits("train", normalize=False, dtype=np.uint8)
    test_images, test_labels = load_digits("test", normalize=False, dtype=np.uint8)
    # Every test class holds ~20% of that class.
    fraction = np.bincount(test_labels, minlength=10) / np.bincount(all_labels)
    assert np.all(np.abs(fraction - 0.2) < 0.01)
    # No image of the test set is in the training set (the digits set has no duplicate pairs
    # across the split: compare the raw bytes of each image).
    train_keys = {img.tobytes() for img in train_images}
    assert not any(img.tobytes() in train_keys for img in test_images)
    assert len(train_images) + len(test_images) == len(all_images)


def test_raw_values_and_fresh_arrays():
    raw, _ = load_digits("all", normalize=False, dtype=np.uint8)
    assert raw.max() == 16
    images, _ = load_digits("train")
    images[:] = -1  # callers own the returned arrays
    assert load_digits("train")[0].min() == 0.0


def test_dataset_and_bad_split():
    ds = load_digits_dataset("test")
    assert len(ds) == 359
    image, label = ds[0]
    assert image.shape == (1, 8, 8) and 0 <= label <= 9
    with pytest.raises(ValueError, match="split"):
        load_digits("validation")


def test_no_sklearn_at_run_time():
    code = (
        "import sys, dualflow.data as d; d.load_digits('all'); "
        "assert 'sklearn' not in sys.modules, 'sklearn was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
