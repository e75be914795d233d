"""VGG-11/16 with and without batch norm (torchvision's ``features.N`` / ``classifier.N`` names,
init and parameter counts), a ``width`` multiplier, and a ``cifar_stem`` variant for 32×32
inputs: a 1×1 adaptive pool and a 512-wide classifier instead of 7×7 and 4096.
"""

from __future__ import annotations

from typing import Any

from dualflow import nn, ops
from dualflow.tensor.core import Tensor
from dualflow.vision.models.layers import AdaptiveAvgPool2d, init_weights
from dualflow.vision.models.predict import ImageClassifier

# torchvision's configurations: conv widths, "M" a 2×2 max pool.
CFGS: dict[str, list[Any]] = {
    "A": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "D": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
}


def make_layers(cfg: list[Any], batch_norm: bool = False, width: float = 1.0) -> nn.Sequential:
    """The convolutional trunk: 3×3 convs (+ batch norm) + ReLU, and 2×2 max pools.

    Example:
        >>> [type(m).__name__ for m in make_layers([8, "M"], batch_norm=True)]
        ['Conv2d', 'BatchNorm2d', 'ReLU', 'MaxPool2d']
    """
    layers: list[nn.Module] = []
    channels = 3
    for v in cfg:
        if v == "M":
            layers.append(nn.MaxPool2d(2, stride=2))
            continue
        out = max(1, round(v * width))
        layers.append(nn.Conv2d(channels, out, 3, padding=1))
        if batch_norm:
            layers.append(nn.BatchNorm2d(out))
        layers.append(nn.ReLU(inplace=True))
        channels = out
    return nn.Sequential(*layers)


class VGG(ImageClassifier):
    """``features`` -> ``avgpool`` -> flatten -> ``classifier`` (Linear, ReLU, Dropout, Linear,
    ReLU, Dropout, Linear: weights ``classifier.0/3/6``).

    Args:
        features: the trunk from ``make_layers``.
        num_classes: outputs of the last linear layer.
        cifar_stem: pool to 1×1 and use a ``512 * width`` hidden size (not torchvision's 7×7 and
            4096, which would be 119M parameters on a 1×1 map); ``predict`` uses 32×32 images.
        width: multiplies the conv widths and the classifier's hidden size.
        dropout: the classifier's dropout probability.

    Example:
        >>> import numpy as np
        >>> net = VGG(make_layers(CFGS["A"], width=0.0625), 5, cifar_stem=True, width=0.0625)
        >>> net(np.zeros((2, 3, 32, 32), np.float32)).shape
        (2, 5)
    """

    def __init__(
        self,
        features: nn.Sequential,
        num_classes: int = 1000,
        cifar_stem: bool = False,
        width: float = 1.0,
        dropout: float = 0.5,
    ) -> None:
        super().__init__(input_size=32 if cifar_stem else 224)
        channels = max(1, round(512 * width))
        pool = 1 if cifar_stem else 7
        hidden = max(1, round((512 if cifar_stem else 4096) * width))
        self.features = features
        self.avgpool = AdaptiveAvgPool2d((pool, pool))
        self.classifier = nn.Sequential(
            nn.Linear(channels * pool * pool, hidden),
            nn.ReLU(True),
            nn.Dropout(dropout),
            nn.Linear(hidden, hidden),
            nn.ReLU(True),
            nn.Dropout(dropout),
            nn.Linear(hidden, num_classes),
        )
        init_weights(self, linear_std=0.01)

    def forward(self, x: Any) -> Tensor:
        """Images (N, 3, H, W) -> logits (N, num_classes)."""
        return self.classifier(ops.flatten(self.avgpool(self.features(x)), 1))


def _vgg(cfg: str, bn: bool, num_classes: int, cifar_stem: bool, width: float) -> VGG:
    return VGG(make_layers(CFGS[cfg], bn, width), num_classes, cifar_stem, width)


def vgg11(num_classes: int = 1000, cifar_stem: bool = False, width: float = 1.0) -> VGG:
    """VGG-11 (configuration A); 132,863,336 parameters at 1000 classes.

    Example:
        >>> len(vgg11(cifar_stem=True, width=0.0625).features)
        21
    """
    return _vgg("A", False, num_classes, cifar_stem, width)


def vgg11_bn(num_classes: int = 1000, cifar_stem: bool = False, width: float = 1.0) -> VGG:
    """VGG-11 with batch norm; 132,868,840 parameters at 1000 classes.

    Example:
        >>> type(vgg11_bn(cifar_stem=True, width=0.0625).features[1]).__name__
        'BatchNorm2d'
    """
    return _vgg("A", True, num_classes, cifar_stem, width)


def vgg16(num_classes: int = 1000, cifar_stem: bool = False, width: float = 1.0) -> VGG:
    """VGG-16 (configuration D); 138,357,544 parameters at 1000 classes.

    Example:
        >>> len(vgg16(cifar_stem=True, width=0.0625).features)
        31
    """
    return _vgg("D", False, num_classes, cifar_stem, width)


def vgg16_bn(num_classes: int = 1000, cifar_stem: bool = False, width: float = 1.0) -> VGG:
    """VGG-16 with batch norm; 138,365,992 parameters at 1000 classes.

    Example:
        >>> len(vgg16_bn(cifar_stem=True, width=0.0625).features)
        44
    """
    return _vgg("D", True, num_classes, cifar_stem, width)
