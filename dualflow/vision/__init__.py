"""Vision: image transforms, datasets read from local files, classification metrics, models.

``dualflow.vision.models`` (the model zoo) is imported on first use, so importing
``dualflow.vision`` stays cheap and works whether or not the zoo is installed.
"""

from __future__ import annotations

import importlib
from typing import Any

from dualflow.vision import datasets, metrics, transforms, utils
from dualflow.vision.datasets import ImageDataset, ImageFolder, cifar10, cifar100, digits, mnist
from dualflow.vision.metrics import (
    confusion_matrix,
    evaluate,
    per_class_accuracy,
    topk_accuracy,
)

__all__ = [
    "ImageDataset",
    "ImageFolder",
    "cifar10",
    "cifar100",
    "confusion_matrix",
    "datasets",
    "digits",
    "evaluate",
    "metrics",
    "mnist",
    "models",
    "per_class_accuracy",
    "topk_accuracy",
    "transforms",
    "utils",
]


def __getattr__(name: str) -> Any:
    # PEP 562: `dualflow.vision.models` loads (and pulls in nn) only when first touched.
    if name == "models":
        return importlib.import_module("dualflow.vision.models")
    raise AttributeError(f"module 'dualflow.vision' has no attribute {name!r}")
