"""One-off: write ``dualflow/data/digits.npz`` from scikit-learn's bundled 8×8 digits.

This is the only place scikit-learn is used; dualflow reads the npz at run time. Source: the UCI
ML repository's "Optical Recognition of Handwritten Digits" test set, as shipped by
``sklearn.datasets.load_digits()`` (1,797 images, 10 classes, pixel values 0..16).

Run once from the repository root: ``python scripts/make_digits_npz.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits

OUT = Path(__file__).resolve().parent.parent / "dualflow" / "data" / "digits.npz"
TEST_FRACTION = 0.2
SPLIT_SEED = 0


def stratified_split(labels: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Return a uint8 mask (1 = test) holding ``round(fraction * n_c)`` images of each class.

    The split is stored in the file rather than recomputed at load time, so it stays fixed even
    if numpy's random streams change between versions.
    """
    rng = np.random.default_rng(seed)
    split = np.zeros(labels.shape, dtype=np.uint8)
    for c in np.unique(labels):
        members = np.flatnonzero(labels == c)
        chosen = rng.permutation(members)[: round(fraction * members.size)]
        split[chosen] = 1
    return split


def main() -> None:
    digits = load_digits()
    images = digits.images
    # The values are integers 0..16 stored as float64; uint8 is exact and 8× smaller.
    assert np.array_equal(images, np.round(images)) and images.min() >= 0 and images.max() <= 16
    images = images.astype(np.uint8)
    labels = digits.target.astype(np.uint8)
    split = stratified_split(labels, TEST_FRACTION, SPLIT_SEED)
    np.savez_compressed(OUT, images=images, labels=labels, split=split)
    print(
        f"wrote {OUT} ({OUT.stat().st_size} bytes): {images.shape[0]} images, "
        f"train {int((split == 0).sum())}, test {int(split.sum())}"
    )


if __name__ == "__main__":
    main()
