"""Neural-network building blocks: Module, Parameter, layers and initializers.

Layers follow PyTorch's constructor signatures, parameter names and default initialization, so a
PyTorch state dict (converted to numpy) loads by name.
"""

from dualflow.nn import functional, init
from dualflow.nn.activation import (
    ELU,
    GELU,
    LeakyReLU,
    LogSoftmax,
    ReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Tanh,
)
from dualflow.nn.containers import ModuleList, Sequential
from dualflow.nn.conv import Conv2d, ConvTranspose2d
from dualflow.nn.dropout import Dropout
from dualflow.nn.embedding import Embedding
from dualflow.nn.linear import Linear
from dualflow.nn.loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from dualflow.nn.module import Module
from dualflow.nn.normalization import BatchNorm1d, BatchNorm2d, LayerNorm
from dualflow.nn.parameter import Parameter
from dualflow.nn.pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d
from dualflow.nn.recurrent import LSTM, LSTMCell
from dualflow.nn.shape import Flatten, Identity

__all__ = [
    "ELU",
    "GELU",
    "LSTM",
    "AdaptiveAvgPool2d",
    "AvgPool2d",
    "BCELoss",
    "BCEWithLogitsLoss",
    "BatchNorm1d",
    "BatchNorm2d",
    "Conv2d",
    "ConvTranspose2d",
    "CrossEntropyLoss",
    "Dropout",
    "Embedding",
    "Flatten",
    "HuberLoss",
    "Identity",
    "KLDivLoss",
    "L1Loss",
    "LSTMCell",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "LogSoftmax",
    "MSELoss",
    "MaxPool2d",
    "Module",
    "ModuleList",
    "NLLLoss",
    "Parameter",
    "ReLU",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "SmoothL1Loss",
    "Softmax",
    "Softplus",
    "Tanh",
    "functional",
    "init",
]
