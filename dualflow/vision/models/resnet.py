"""ResNet-18/34/50/101/152 (torchvision's "v1.5": the stride sits on the 3×3 conv), with
torchvision's parameter names, init and counts, a ``cifar_stem`` for 32×32 inputs (3×3 stride-1
conv1, no max pool) and a ``width`` multiplier for narrow models.
"""

from __future__ import annotations

from typing import Any

from dualflow import nn, ops
from dualflow.tensor.core import Tensor
from dualflow.vision.models.layers import init_weights
from dualflow.vision.models.predict import ImageClassifier


def _conv3x3(inp: int, out: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(inp, out, 3, stride=stride, padding=1, bias=False)


def _conv1x1(inp: int, out: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(inp, out, 1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """Two 3×3 convs with batch norm and an identity (or 1×1 ``downsample``) shortcut.

    Example:
        >>> import numpy as np
        >>> BasicBlock(4, 8, stride=2)(np.zeros((1, 4, 6, 6), np.float32)).shape
        (1, 8, 3, 3)
    """

    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = _conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = _conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = _downsample(inplanes, planes * self.expansion, stride)
        self.stride = stride

    def forward(self, x: Any) -> Tensor:
        """``relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))``."""
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """1×1 reduce, 3×3 (strided), 1×1 expand (×4) convs with batch norm, plus the shortcut.

    Example:
        >>> import numpy as np
        >>> Bottleneck(8, 2)(np.zeros((1, 8, 4, 4), np.float32)).shape
        (1, 8, 4, 4)
    """

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = _conv1x1(inplanes, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = _conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = _conv1x1(planes, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = _downsample(inplanes, planes * self.expansion, stride)
        self.stride = stride

    def forward(self, x: Any) -> Tensor:
        """The three convs, then ``relu(out + shortcut(x))``."""
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


def _downsample(inplanes: int, outplanes: int, stride: int) -> nn.Sequential | None:
    # torchvision's shortcut projection, named downsample.0 (conv) / downsample.1 (bn).
    if stride == 1 and inplanes == outplanes:
        return None
    return nn.Sequential(_conv1x1(inplanes, outplanes, stride), nn.BatchNorm2d(outplanes))


class ResNet(ImageClassifier):
    """A ResNet of ``block``s, ``layers[i]`` blocks per stage (torchvision's layout and names:
    ``conv1``, ``bn1``, ``layer1.0.conv1``, ``layer2.0.downsample.0``, ``fc``...).

    Args:
        block: ``BasicBlock`` or ``Bottleneck``.
        layers: blocks in each of the four stages.
        num_classes: outputs of ``fc``.
        cifar_stem: a 3×3 stride-1 ``conv1`` and no max pool (``maxpool`` is an Identity), for
            32×32 inputs; ``predict`` then uses 32×32 images.
        width: multiplies the stage widths 64/128/256/512 (narrow models for fast tests).

    Example:
        >>> import numpy as np
        >>> net = ResNet(BasicBlock, [1, 1, 1, 1], num_classes=3, cifar_stem=True, width=0.125)
        >>> net(np.zeros((2, 3, 8, 8), np.float32)).shape
        (2, 3)
    """

    def __init__(
        self,
        block: type[BasicBlock] | type[Bottleneck],
        layers: list[int],
        num_classes: int = 1000,
        cifar_stem: bool = False,
        width: float = 1.0,
    ) -> None:
        super().__init__(input_size=32 if cifar_stem else 224)
        planes = [max(1, round(c * width)) for c in (64, 128, 256, 512)]
        self.inplanes = planes[0]
        if cifar_stem:
            self.conv1 = _conv3x3(3, planes[0])
        else:
            self.conv1 = nn.Conv2d(3, planes[0], 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(planes[0])
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.Identity() if cifar_stem else nn.MaxPool2d(3, stride=2, padding=1)
        for i, (p, n) in enumerate(zip(planes, layers)):
            setattr(self, f"layer{i + 1}", self._make_layer(block, p, n, 1 if i == 0 else 2))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(planes[3] * block.expansion, num_classes)
        init_weights(self)  # fc keeps PyTorch's default Linear init, as torchvision

    def _make_layer(self, block: Any, planes: int, blocks: int, stride: int) -> nn.Sequential:
        stage = [block(self.inplanes, planes, stride)]
        self.inplanes = planes * block.expansion
        stage += [block(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*stage)

    def forward(self, x: Any) -> Tensor:
        """Images (N, 3, H, W) -> logits (N, num_classes)."""
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(ops.flatten(self.avgpool(x), 1))


def resnet18(num_classes: int = 1000, cifar_stem: bool = False, width: float = 1.0) -> ResNet:
    """ResNet-18 (BasicBlock, [2, 2, 2, 2]); 11,689,512 parameters at 1000 classes.

    Example:
        >>> resnet18(10, cifar_stem=True, width=0.125).fc.weight.shape
        (10, 64)
    """
    return ResNet(BasicBlock, [2, 2, 2, 2], num_classes, cifar_stem, width)


def resnet34(num_classes: int = 1000, cifar_stem: bool = False, width: float = 1.0) -> ResNet:
    """ResNet-34 (BasicBlock, [3, 4, 6, 3]); 21,797,672 parameters at 1000 classes.

    Example:
        >>> len(resnet34(width=0.125).layer3)
        6
    """
    return ResNet(BasicBlock, [3, 4, 6, 3], num_classes, cifar_stem, width)


def resnet50(num_classes: int = 1000, cifar_stem: bool = False, width: float = 1.0) -> ResNet:
    """ResNet-50 (Bottleneck, [3, 4, 6, 3]); 25,557,032 parameters at 1000 classes.

    Example:
        >>> resnet50(width=0.125).fc.in_features
        256
    """
    return ResNet(Bottleneck, [3, 4, 6, 3], num_classes, cifar_stem, width)


def resnet101(num_classes: int = 1000, cifar_stem: bool = False, width: float = 1.0) -> ResNet:
    """ResNet-101 (Bottleneck, [3, 4, 23, 3]); 44,549,160 parameters at 1000 classes.

    Example:
        >>> len(resnet101(width=0.125).layer3)
        23
    """
    return ResNet(Bottleneck, [3, 4, 23, 3], num_classes, cifar_stem, width)


def resnet152(num_classes: int = 1000, cifar_stem: bool = False, width: float = 1.0) -> ResNet:
    """ResNet-152 (Bottleneck, [3, 8, 36, 3]); 60,192,808 parameters at 1000 classes.

    Example:
        >>> len(resnet152(width=0.125).layer2)
        8
    """
    return ResNet(Bottleneck, [3, 8, 36, 3], num_classes, cifar_stem, width)
