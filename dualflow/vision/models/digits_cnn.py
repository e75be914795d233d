"""The small CNN for the embedded 8×8 digits, shared by the examples and the benchmarks."""

from __future__ import annotations

from dualflow import nn


def digits_cnn(dropout: float = 0.0, num_classes: int = 10) -> nn.Sequential:
    """Two conv blocks (8×8 -> 4×4 -> 2×2) and a linear classifier.

    Args:
        dropout: dropout rate before the classifier (0 leaves it out, so runs compare exactly).
        num_classes: number of output classes.

    Example:
        >>> len(list(digits_cnn().params())), len(list(digits_cnn(0.25).params()))
        (10, 10)
    """
    layers = [
        nn.Conv2d(1, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
    ]
    if dropout:
        layers.append(nn.Dropout(dropout))
    layers.append(nn.Linear(32 * 2 * 2, num_classes))
    return nn.Sequential(*layers)
