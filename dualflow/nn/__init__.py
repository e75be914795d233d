"""Neural-network building blocks: Module, Parameter, layers, initializers and ``nn.utils``.

Layers follow PyTorch's constructor signatures, parameter names and default initialization, so a
PyTorch state dict (converted to numpy) loads by name.

Import cycle: ``Module`` is one class written in three files: ``module`` (the class),
``module_state`` (its state-dict and fail-closed helpers) and ``hooks`` (its forward and backward
hooks); the two helpers name ``module``'s ``Module`` in annotations only. Issue 37, item 5 (the
mixin and split-class item) is where it is to become one collaborating object per file.
"""

from typing import Any

from dualflow.nn import functional, init, parallel, utils
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
from dualflow.nn.attention import MultiheadAttention
from dualflow.nn.cells import GRUCell, LSTMCell, RNNCell
from dualflow.nn.containers import (
    ModuleDict,
    ModuleList,
    ParameterDict,
    ParameterList,
    Sequential,
)
from dualflow.nn.conv import Conv2d, ConvTranspose2d
from dualflow.nn.conv1d import Conv1d, ConvTranspose1d
from dualflow.nn.dropout import Dropout, Dropout1d, Dropout2d, Dropout3d
from dualflow.nn.embedding import Embedding
from dualflow.nn.group_norm import GroupNorm, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
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
from dualflow.nn.padding import (
    CircularPad1d,
    CircularPad2d,
    CircularPad3d,
    ConstantPad1d,
    ConstantPad2d,
    ConstantPad3d,
    ReflectionPad1d,
    ReflectionPad2d,
    ReflectionPad3d,
    ReplicationPad1d,
    ReplicationPad2d,
    ReplicationPad3d,
    ZeroPad1d,
    ZeroPad2d,
    ZeroPad3d,
)
from dualflow.nn.parameter import Parameter
from dualflow.nn.pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d
from dualflow.nn.pooling1d import AdaptiveAvgPool1d, AvgPool1d, MaxPool1d
from dualflow.nn.ported import DataParallel, EmbeddingBag, PReLU
from dualflow.nn.recurrent import GRU, LSTM, RNN
from dualflow.nn.shape import Flatten, Identity, Unflatten
from dualflow.nn.transformer import TransformerEncoder, TransformerEncoderLayer
from dualflow.nn.transformer_decoder import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
)
from dualflow.nn.upsampling import (
    PixelShuffle,
    PixelUnshuffle,
    Upsample,
    UpsamplingBilinear2d,
    UpsamplingNearest2d,
)
from dualflow.tensor.methods.hints import missing
from dualflow.tensor.methods.suggest import NN_RENAMES

__all__ = [
    "ELU",
    "GELU",
    "GRU",
    "LSTM",
    "RNN",
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "AvgPool1d",
    "AvgPool2d",
    "BCELoss",
    "BCEWithLogitsLoss",
    "BatchNorm1d",
    "BatchNorm2d",
    "Conv1d",
    "Conv2d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "CrossEntropyLoss",
    "Dropout",
    "Dropout1d",
    "Dropout2d",
    "Dropout3d",
    "Embedding",
    "Flatten",
    "GRUCell",
    "GroupNorm",
    "HuberLoss",
    "Identity",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
    "KLDivLoss",
    "L1Loss",
    "LSTMCell",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "LogSoftmax",
    "MSELoss",
    "MaxPool1d",
    "MaxPool2d",
    "Module",
    "ModuleDict",
    "ModuleList",
    "MultiheadAttention",
    "NLLLoss",
    "Parameter",
    "ParameterDict",
    "ParameterList",
    "PixelShuffle",
    "PixelUnshuffle",
    "RNNCell",
    "ReLU",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "SmoothL1Loss",
    "Softmax",
    "Softplus",
    "Tanh",
    "Transformer",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
    "Unflatten",
    "Upsample",
    "UpsamplingBilinear2d",
    "UpsamplingNearest2d",
    "functional",
    "init",
    "utils",
]
# issue 40's ported layers (dualflow/nn/padding.py, dualflow/nn/ported.py)
__all__ += ["CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d", "ConstantPad2d"]
__all__ += ["ConstantPad3d", "DataParallel", "EmbeddingBag", "PReLU", "ReflectionPad1d"]
__all__ += ["ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d"]
__all__ += ["ReplicationPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "parallel"]

# PyTorch nn names dualflow does not have -> what to use instead (AttributeError says so).
_INSTEAD = {
    "SyncBatchNorm": "not supported: BatchNorm2d keeps per-process statistics",
    "Conv3d": "3-D convolutions are not supported (no 3-D conv op)",
    "ConvTranspose3d": "3-D convolutions are not supported (no 3-D conv op)",
    "MaxPool3d": "3-D pooling is not supported",
    "AvgPool3d": "3-D pooling is not supported",
    "BatchNorm3d": "not supported: use BatchNorm2d on a reshaped (N, C, D*H, W) input",
    "LazyLinear": "lazy modules are not supported: pass in_features to Linear",
    "LazyConv2d": "lazy modules are not supported: pass in_channels to Conv2d",
    "RNNBase": "use RNN, GRU or LSTM",
    "AdaptiveMaxPool2d": "not supported: use AdaptiveAvgPool2d or MaxPool2d",
    "AdaptiveMaxPool1d": "not supported: use AdaptiveAvgPool1d or MaxPool1d",
    "quantized": "quantization is not supported",
}


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    subject = "module 'dualflow.nn'"
    raise missing(subject, f"nn.{name}", name, _INSTEAD, lambda: __all__, NN_RENAMES)
