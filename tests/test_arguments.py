"""Public constructors refuse bad arguments (issue 19): ``ArgumentError`` (a ValueError) naming the
class, the argument, the bad value and the line that called the constructor.

Each case is written as a user would trigger it; before, most of these were accepted and failed
later (or never): ``Conv2d(kernel_size=0)`` output zeros, BatchNorm's ``eps=-1`` gave NaN and
``momentum=2.0`` a wrong running mean, ``Linear(2.5, 3)`` truncated to 2, a NaN or infinite
learning rate was accepted, ``Adam(betas=(0.9,))`` failed with a bare unpack error.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from dualflow import nn, optim
from dualflow.data import DataLoader
from dualflow.distributed.communicator import Communicator
from dualflow.distributed.loopback import LoopbackCommunicator, LoopbackHub
from dualflow.errors import ArgumentError
from dualflow.optim import lr_scheduler
from dualflow.vision import transforms

NAN, INF = float("nan"), float("inf")


def _params() -> list:
    return [nn.Parameter(np.zeros(2, np.float32))]


def _sgd() -> optim.SGD:
    return optim.SGD(_params(), lr=0.1)


# (constructor call, class named, argument named, bad value shown)
CASES = [
    (lambda: nn.Linear(2.5, 3), "Linear", "in_features", "2.5"),
    (lambda: nn.Linear(4, 0), "Linear", "out_features", "0"),
    (lambda: nn.Conv2d(3, 8, kernel_size=0), "Conv2d", "kernel_size", "(0, 0)"),
    (lambda: nn.Conv2d(3, 8, 3, groups=1.5), "Conv2d", "groups", "1.5"),
    (
        lambda: nn.ConvTranspose2d(3, 8, 3, stride=2, output_padding=2),
        "ConvTranspose2d",
        "output_padding",
        "2",
    ),
    (lambda: nn.BatchNorm2d(3, eps=-1), "BatchNorm2d", "eps", "-1"),
    (lambda: nn.BatchNorm2d(3, momentum=2.0), "BatchNorm2d", "momentum", "2.0"),
    (lambda: nn.BatchNorm1d(3, eps=NAN), "BatchNorm1d", "eps", "nan"),
    (lambda: nn.InstanceNorm2d(3, momentum=-0.5), "InstanceNorm2d", "momentum", "-0.5"),
    (lambda: nn.LayerNorm(0), "LayerNorm", "normalized_shape", "0"),
    (lambda: nn.GroupNorm(2, 4, eps=-1e-5), "GroupNorm", "eps", "-1e-05"),
    (lambda: nn.Embedding(10.5, 3), "Embedding", "num_embeddings", "10.5"),
    (lambda: nn.AdaptiveAvgPool2d(0), "AdaptiveAvgPool2d", "output_size", "0"),
    (lambda: nn.LeakyReLU(NAN), "LeakyReLU", "negative_slope", "nan"),
    (lambda: nn.Softplus(beta=0), "Softplus", "beta", "0"),
    (lambda: nn.Softmax(dim=1.5), "Softmax", "dim", "1.5"),
    (lambda: nn.HuberLoss(delta=-1.0), "HuberLoss", "delta", "-1.0"),
    (
        lambda: nn.CrossEntropyLoss(label_smoothing=2.0),
        "CrossEntropyLoss",
        "label_smoothing",
        "2.0",
    ),
    (
        lambda: nn.TransformerEncoderLayer(8, 2, dim_feedforward=0),
        "TransformerEncoderLayer",
        "dim_feedforward",
        "0",
    ),
    (lambda: optim.SGD(_params(), lr=NAN), "SGD", "lr", "nan"),
    (lambda: optim.Adam(_params(), lr=INF), "Adam", "lr", "inf"),
    (lambda: optim.Adam(_params(), betas=(0.9,)), "Adam", "betas", "(0.9,)"),
    (lambda: optim.SGD(_params(), lr=0.1, momentum=NAN), "SGD", "momentum", "nan"),
    (lambda: optim.RMSprop(_params(), eps=-1.0), "RMSprop", "eps", "-1.0"),
    (lambda: optim.AdamW(_params(), weight_decay=INF), "AdamW", "weight_decay", "inf"),
    (lambda: _sgd().add_param_group({"params": _params(), "lr": NAN}), "SGD", "lr", "nan"),
    (lambda: lr_scheduler.StepLR(_sgd(), 2, gamma=NAN), "StepLR", "gamma", "nan"),
    (lambda: lr_scheduler.MultiStepLR(_sgd(), [1.5]), "MultiStepLR", "milestones", "1.5"),
    (
        lambda: lr_scheduler.ReduceLROnPlateau(_sgd(), patience=-1),
        "ReduceLROnPlateau",
        "patience",
        "-1",
    ),
    (
        lambda: lr_scheduler.OneCycleLR(_sgd(), max_lr=NAN, total_steps=10),
        "OneCycleLR",
        "max_lr",
        "nan",
    ),
    (lambda: nn.MultiheadAttention(8, 2, kdim=0), "MultiheadAttention", "kdim", "0"),
    (lambda: transforms.Normalize([0.5], [0.0]), "Normalize", "std", "[0.0]"),
    (lambda: transforms.RandomCrop(0), "RandomCrop", "size", "0"),
    (lambda: transforms.RandomHorizontalFlip(p=2), "RandomHorizontalFlip", "p", "2"),
    (lambda: DataLoader([1, 2], batch_size=0), "DataLoader", "batch_size", "0"),
    (lambda: DataLoader([1, 2], collate_fn=3), "DataLoader", "collate_fn", "3"),
    (lambda: LoopbackHub(2, timeout=-1), "LoopbackHub", "timeout", "-1"),
    (lambda: LoopbackCommunicator(LoopbackHub(2), 5), "LoopbackCommunicator", "rank", "5"),
    (lambda: Communicator(0, 1, timeout=NAN), "Communicator", "timeout", "nan"),
]


@pytest.mark.parametrize(
    ("make", "owner", "argument", "shown"), CASES, ids=[f"{c[1]}.{c[2]}" for c in CASES]
)
def test_constructor_names_the_argument_the_value_and_the_line(
    make, owner: str, argument: str, shown: str
) -> None:
    with pytest.raises(ArgumentError) as info:
        make()
    message = str(info.value)
    assert message.startswith(f"{owner}: {argument}"), message
    assert f"got {shown}" in message, message
    assert message.endswith(f"at {os.path.abspath(__file__)}:{make.__code__.co_firstlineno}")
    assert isinstance(info.value, ValueError)  # what PyTorch raises for these


def test_valid_arguments_still_construct() -> None:
    assert nn.Linear(np.int64(3), 2).in_features == 3  # numpy integers are integers
    assert nn.BatchNorm2d(3, eps=0.0, momentum=None).momentum is None  # cumulative average
    assert nn.LayerNorm((2, 3)).normalized_shape == (2, 3)
    assert optim.SGD(_params(), lr=0).defaults["lr"] == 0
    opt = optim.Adam(_params(), betas=[0.5, 0.9])  # any sequence of two
    assert lr_scheduler.LinearLR(opt, start_factor=0.0).start_factor == 0.0  # a full warm-up
