"""MobileNetV2 (inverted residuals, depthwise 3×3 convs via ``groups``, ReLU6) with
torchvision's names (``features.0.0``, ``features.1.conv.0.0``, ``classifier.1``), init and
parameter count, a ``width`` multiplier and a ``cifar_stem`` (stride-1 first conv) for 32×32.
"""

from __future__ import annotations

from typing import Any

from dualflow import nn, ops
from dualflow.tensor.core import Tensor
from dualflow.vision.models.layers import ReLU6, init_weights
from dualflow.vision.models.predict import ImageClassifier

# (expansion t, output channels c, repeats n, first stride s), torchvision's table.
SETTING = [
    [1, 16, 1, 1],
    [6, 24, 2, 2],
    [6, 32, 3, 2],
    [6, 64, 4, 2],
    [6, 96, 3, 1],
    [6, 160, 3, 2],
    [6, 320, 1, 1],
]


def make_divisible(value: float, divisor: int = 8) -> int:
    """Round ``value`` to a multiple of ``divisor`` (at least ``divisor``), never more than 10%
    down (torchvision's ``_make_divisible``).

    Example:
        >>> make_divisible(32 * 0.75), make_divisible(1280 * 0.1)
        (24, 128)
    """
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


class ConvBNReLU6(nn.Sequential):
    """Conv (no bias, "same" padding) -> BatchNorm2d -> ReLU6, named 0/1/2 (torchvision's
    ``Conv2dNormActivation``).

    Example:
        >>> import numpy as np
        >>> ConvBNReLU6(3, 4, stride=2)(np.zeros((1, 3, 8, 8), np.float32)).shape
        (1, 4, 4, 4)
    """

    def __init__(
        self, inp: int, out: int, kernel_size: int = 3, stride: int = 1, groups: int = 1
    ) -> None:
        padding = (kernel_size - 1) // 2
        super().__init__(
            nn.Conv2d(inp, out, kernel_size, stride, padding, groups=groups, bias=False),
            nn.BatchNorm2d(out),
            ReLU6(inplace=True),
        )


class InvertedResidual(nn.Module):
    """1×1 expansion (when ``expand_ratio`` > 1), 3×3 depthwise conv, linear 1×1 projection;
    the input is added back when the shape is kept.

    Example:
        >>> import numpy as np
        >>> block = InvertedResidual(8, 8, stride=1, expand_ratio=6)
        >>> block.use_res_connect, block(np.zeros((1, 8, 4, 4), np.float32)).shape
        (True, (1, 8, 4, 4))
    """

    def __init__(self, inp: int, oup: int, stride: int, expand_ratio: int) -> None:
        super().__init__()
        hidden = round(inp * expand_ratio)
        self.stride = stride
        self.use_res_connect = stride == 1 and inp == oup
        layers: list[nn.Module] = [ConvBNReLU6(inp, hidden, 1)] if expand_ratio != 1 else []
        layers += [
            ConvBNReLU6(hidden, hidden, stride=stride, groups=hidden),
            nn.Conv2d(hidden, oup, 1, bias=False),
            nn.BatchNorm2d(oup),
        ]
        self.conv = nn.Sequential(*layers)
        self.out_channels = oup

    def forward(self, x: Any) -> Tensor:
        """``x + conv(x)`` with the residual, else ``conv(x)``."""
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(ImageClassifier):
    """MobileNetV2: ``features`` (stem, 17 inverted residuals, 1×1 conv to ``last_channel``),
    global average pool, ``classifier`` (Dropout, Linear).

    Args:
        num_classes: outputs of ``classifier.1``.
        cifar_stem: stride 1 in the first conv (32×32 inputs); ``predict`` uses 32×32 images.
        width: torchvision's ``width_mult`` (channels rounded to multiples of 8; the last
            conv keeps 1280 channels when ``width`` < 1, as torchvision).
        dropout: the classifier's dropout probability.

    Example:
        >>> import numpy as np
        >>> net = MobileNetV2(num_classes=4, cifar_stem=True, width=0.25)
        >>> net(np.zeros((2, 3, 16, 16), np.float32)).shape  # batch 2: BN trains on 1×1 maps
        (2, 4)
    """

    def __init__(
        self,
        num_classes: int = 1000,
        cifar_stem: bool = False,
        width: float = 1.0,
        dropout: float = 0.2,
    ) -> None:
        super().__init__(input_size=32 if cifar_stem else 224)
        channels = make_divisible(32 * width)
        self.last_channel = make_divisible(1280 * max(1.0, width))
        features: list[nn.Module] = [ConvBNReLU6(3, channels, stride=1 if cifar_stem else 2)]
        for t, c, n, s in SETTING:
            out = make_divisible(c * width)
            for i in range(n):
                features.append(InvertedResidual(channels, out, s if i == 0 else 1, t))
                channels = out
        features.append(ConvBNReLU6(channels, self.last_channel, 1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(
            nn.Dropout(dropout), nn.Linear(self.last_channel, num_classes)
        )
        init_weights(self, linear_std=0.01)

    def forward(self, x: Any) -> Tensor:
        """Images (N, 3, H, W) -> logits (N, num_classes)."""
        x = ops.global_avg_pool2d(self.features(x))
        return self.classifier(ops.flatten(x, 1))


def mobilenet_v2(
    num_classes: int = 1000, cifar_stem: bool = False, width: float = 1.0
) -> MobileNetV2:
    """MobileNetV2; 3,504,872 parameters at 1000 classes and width 1.

    Example:
        >>> mobilenet_v2(10, cifar_stem=True, width=0.25).classifier[1].weight.shape
        (10, 1280)
    """
    return MobileNetV2(num_classes, cifar_stem, width)
