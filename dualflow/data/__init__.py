"""Datasets, batching and the embedded digits dataset.

``TensorDataset``/``Subset``/``split_dataset`` describe data, ``DataLoader`` batches it
(seeded, resumable, optionally prefetched) and ``load_digits`` is a small real dataset that
ships inside the package.
"""

from dualflow.data.collate import default_collate
from dualflow.data.dataset import Dataset, Subset, TensorDataset, split_dataset
from dualflow.data.digits import load_digits, load_digits_dataset
from dualflow.data.loader import DataLoader
from dualflow.data.prefetch import Prefetcher

__all__ = [
    "DataLoader",
    "Dataset",
    "Prefetcher",
    "Subset",
    "TensorDataset",
    "default_collate",
    "load_digits",
    "load_digits_dataset",
    "split_dataset",
]
