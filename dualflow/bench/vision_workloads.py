"""The bench's image-model training workloads: the digits CNN, the peers' small CNN, ResNet-18
(CIFAR) and ResNet-50.

Each builder returns the same ``{"step", "params"}`` dict as ``dualflow.bench.workloads`` and
builds its tensors and modules on the requested device; the modes compile the whole step
(forward, backward and optimizer update) as one function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import dualflow
import dualflow.data
from dualflow import nn, ops, optim
from dualflow.device import CPU, Device
from dualflow.vision.models import resnet18, resnet50


def sgd_step(loss: Any, params: list[Any], lr: float) -> Any:
    """Backward of ``loss`` into fresh ``.grad``s, then a plain SGD update; returns ``loss``."""
    for p in params:
        p.grad = None
    loss.backward()
    with dualflow.no_grad():
        for p in params:
            ops.assign(p, p - lr * p.grad)
    return loss


def _cnn_params(rng: np.random.Generator, device: Device) -> list[Any]:
    def tensor(shape: tuple[int, ...], scale: float = 0.0, fill: float = 0.0) -> Any:
        value = rng.normal(0, scale, shape) if scale else np.full(shape, fill)
        return dualflow.tensor(value.astype(np.float32), device=device, requires_grad=True)

    return [
        tensor((16, 1, 3, 3), (2 / 9) ** 0.5),
        tensor((16,)),
        tensor((16,), fill=1.0),
        tensor((16,)),
        tensor((32, 16, 3, 3), (2 / 144) ** 0.5),
        tensor((32,)),
        tensor((32,), fill=1.0),
        tensor((32,)),
        tensor((10, 32 * 2 * 2), (1 / 128) ** 0.5),
        tensor((10,)),
    ]


def build_cnn(rng: np.random.Generator, device: Device = CPU, batch: int = 64) -> dict[str, Any]:
    """Digits CNN train step: (conv3x3 + batch_norm + relu + max_pool) x2 + linear, SGD.

    Example:
        >>> built = build_cnn(np.random.default_rng(0), batch=4)
        >>> built["step"]().shape
        ()
    """
    images, labels = dualflow.data.load_digits("train")
    pick = rng.choice(len(labels), batch, replace=False)
    x = dualflow.tensor(images[pick], device=device)
    y = dualflow.tensor(labels[pick], device=device)
    params = _cnn_params(rng, device)

    def step() -> Any:
        h = x
        for i in (0, 4):
            w, b, gamma, beta = params[i : i + 4]
            h = ops.conv2d(h, w, b, pad=1)
            h = ops.max_pool2d(ops.relu(ops.batch_norm(h, gamma, beta)), 2)
        logits = ops.linear(ops.flatten(h), params[8], params[9])
        return sgd_step(ops.softmax_cross_entropy(logits, y), params, 0.05)

    return {"step": step, "params": params}


def _classifier_step(
    model: nn.Module,
    rng: np.random.Generator,
    device: Device,
    shape: tuple[int, ...],
    classes: int,
    momentum: float = 0.9,
) -> dict[str, Any]:
    # Random images and labels: the step's cost does not depend on the pixel values.
    x = dualflow.tensor(rng.standard_normal(shape, dtype=np.float32), device=device)
    labels = dualflow.tensor(rng.integers(0, classes, shape[0]), device=device)
    params = list(model.params())
    opt = optim.SGD(params, lr=0.01, momentum=momentum)

    def step() -> Any:
        opt.zero_grad()
        loss = ops.softmax_cross_entropy(model(x), labels)
        loss.backward()
        opt.step()
        return loss

    return {"step": step, "params": params}


def _seeded(rng: np.random.Generator, factory: Callable[[], nn.Module], device: Device) -> Any:
    # Module init draws from dualflow's generator: seed it from the bench's rng so every mode
    # starts from the same weights.
    dualflow.random.seed(int(rng.integers(2**31)))
    return factory().to_device(device)


def _small_cnn(width: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, width, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(width, 2 * width, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(2 * width, 2 * width, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(2 * width, 10),
    )


def build_small_cnn(
    rng: np.random.Generator,
    device: Device = CPU,
    batch: int = 32,
    size: int = 32,
    width: int = 32,
) -> dict[str, Any]:
    """The peers' small CNN train step: conv3x3 3->32 + ReLU, conv3x3 32->64 + ReLU, max pool 2,
    conv3x3 64->64 + ReLU, global average pool, linear 64->10, cross entropy, SGD lr 0.01.

    ``width`` is the first conv's output channels (the others are twice it); ``size`` the image
    side (3 x ``size`` x ``size`` inputs).

    Example:
        >>> built = build_small_cnn(np.random.default_rng(0), batch=2, size=8, width=4)
        >>> built["step"]().shape, [tuple(p.shape) for p in built["params"]][:2]
        ((), [(4, 3, 3, 3), (4,)])
    """
    model = _seeded(rng, lambda: _small_cnn(width), device)
    return _classifier_step(model, rng, device, (batch, 3, size, size), 10, momentum=0.0)


def build_resnet18(
    rng: np.random.Generator, device: Device = CPU, batch: int = 16, width: float = 1.0
) -> dict[str, Any]:
    """ResNet-18 (CIFAR stem, 10 classes) train step on ``batch`` 3x32x32 images, plain SGD
    lr 0.01 (as the peers' ``w6_resnet18_torch.py``).

    Example:
        >>> built = build_resnet18(np.random.default_rng(0), batch=2, width=0.125)
        >>> built["step"]().shape
        ()
    """
    model = _seeded(rng, lambda: resnet18(num_classes=10, cifar_stem=True, width=width), device)
    return _classifier_step(model, rng, device, (batch, 3, 32, 32), 10, momentum=0.0)


def build_resnet50(
    rng: np.random.Generator,
    device: Device = CPU,
    batch: int = 64,
    size: int = 224,
    width: float = 1.0,
) -> dict[str, Any]:
    """ResNet-50 (1000 classes) train step on ``batch`` 3x``size``x``size`` images, SGD momentum.

    Example:
        >>> built = build_resnet50(np.random.default_rng(0), batch=2, size=32, width=0.125)
        >>> built["step"]().shape
        ()
    """
    model = _seeded(rng, lambda: resnet50(num_classes=1000, width=width), device)
    return _classifier_step(model, rng, device, (batch, 3, size, size), 1000)
