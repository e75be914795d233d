"""The model zoo: ResNet, VGG and MobileNetV2 with torchvision's parameter names (a converted
torchvision state dict loads by name), a ``cifar_stem`` option for 32×32 inputs, a ``width``
multiplier, and ChainerCV's ``model.predict(images)`` returning class probabilities.
"""

from dualflow.vision.models.digits_cnn import digits_cnn
from dualflow.vision.models.layers import ReLU6, init_weights
from dualflow.vision.models.mobilenet import InvertedResidual, MobileNetV2, mobilenet_v2
from dualflow.vision.models.predict import ImageClassifier, topk
from dualflow.vision.models.resnet import (
    BasicBlock,
    Bottleneck,
    ResNet,
    resnet18,
    resnet34,
    resnet50,
    resnet101,
    resnet152,
)
from dualflow.vision.models.vgg import VGG, vgg11, vgg11_bn, vgg16, vgg16_bn

__all__ = [
    "VGG",
    "BasicBlock",
    "Bottleneck",
    "ImageClassifier",
    "InvertedResidual",
    "MobileNetV2",
    "ReLU6",
    "ResNet",
    "digits_cnn",
    "init_weights",
    "mobilenet_v2",
    "resnet18",
    "resnet34",
    "resnet50",
    "resnet101",
    "resnet152",
    "topk",
    "vgg11",
    "vgg11_bn",
    "vgg16",
    "vgg16_bn",
]
