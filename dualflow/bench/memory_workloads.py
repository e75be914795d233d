"""The bench's memory-for-time workloads (issue 42), at the issue's batch of 64: the ``resnet18``
row's step (``resnet18-b64``), the same with its stages checkpointed
(``dualflow.utils.checkpoint_sequential``) and compiled with ``memory_budget=0.5`` (the remat
pass); and the MLP trained under ``autocast`` + ``GradScaler``.

Each builder returns the same ``{"step", "params"}`` dict as ``dualflow.bench.workloads``; compare
the ResNet rows' time and peak memory with ``resnet18-b64``, the MLP's with the ``mlp`` row.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import dualflow
from dualflow import ops, optim
from dualflow.amp import GradScaler, autocast
from dualflow.bench.vision_workloads import _seeded, build_resnet18
from dualflow.device import CPU, Device
from dualflow.utils.checkpoint import checkpoint_sequential
from dualflow.vision.models import resnet18

REMAT_BUDGET = 0.5  # the resnet18-remat row's memory_budget (issue 42's goal row)
BATCH = 64  # issue 42 measures the ResNet-18 CIFAR step at batch 64


def _stagewise(model: Any, x: Any) -> Any:
    """ResNet forward with its four stages checkpointed as PyTorch's ``checkpoint_sequential``
    does (every segment but the last: its input is kept, its activations recomputed)."""
    x = model.maxpool(model.relu(model.bn1(model.conv1(x))))
    stages = [model.layer1, model.layer2, model.layer3, model.layer4]
    return model.fc(ops.flatten(model.avgpool(checkpoint_sequential(stages, 4, x)), 1))


def build_resnet18_b64(
    rng: np.random.Generator, device: Device = CPU, batch: int = BATCH, width: float = 1.0
) -> dict[str, Any]:
    """The ``resnet18`` row's step at batch 64: the baseline of the checkpoint and remat rows.

    Example:
        >>> build_resnet18_b64(np.random.default_rng(0), batch=2, width=0.125)["step"]().shape
        ()
    """
    return build_resnet18(rng, device, batch=batch, width=width)


def build_resnet18_checkpoint(
    rng: np.random.Generator, device: Device = CPU, batch: int = BATCH, width: float = 1.0
) -> dict[str, Any]:
    """The ``resnet18-b64`` row's step (same weights, data, SGD) with its stages checkpointed.

    Example:
        >>> built = build_resnet18_checkpoint(np.random.default_rng(0), batch=2, width=0.125)
        >>> built["step"]().shape
        ()
    """
    model = _seeded(rng, lambda: resnet18(num_classes=10, cifar_stem=True, width=width), device)
    x = dualflow.tensor(rng.standard_normal((batch, 3, 32, 32), dtype=np.float32), device=device)
    labels = dualflow.tensor(rng.integers(0, 10, batch), device=device)
    params = list(model.params())
    opt = optim.SGD(params, lr=0.01, momentum=0.0)

    def step() -> Any:
        opt.zero_grad()
        loss = ops.softmax_cross_entropy(_stagewise(model, x), labels)
        loss.backward()
        opt.step()
        return loss

    return {"step": step, "params": params}


def build_resnet18_remat(
    rng: np.random.Generator, device: Device = CPU, batch: int = BATCH, width: float = 1.0
) -> dict[str, Any]:
    """The ``resnet18-b64`` row's step unchanged, compiled with ``memory_budget=0.5`` (the
    remat pass recomputes forward values in backward; eager runs the plain step).

    Example:
        >>> built = build_resnet18_remat(np.random.default_rng(0), batch=2, width=0.125)
        >>> built["compile"], built["step"]().shape
        ({'memory_budget': 0.5}, ())
    """
    built = build_resnet18(rng, device, batch=batch, width=width)
    return {**built, "compile": {"memory_budget": REMAT_BUDGET}}


def build_mlp_autocast(
    rng: np.random.Generator, device: Device = CPU, batch: int = 64
) -> dict[str, Any]:
    """The ``mlp`` row's MLP 784-1000-1000-10 under float16 autocast with a GradScaler (float32
    master weights, SGD).

    Example:
        >>> build_mlp_autocast(np.random.default_rng(0), batch=2)["step"]().shape
        ()
    """
    from dualflow.bench.workloads import _mlp_forward, _mlp_params  # noqa: PLC0415 - a cycle

    params = _mlp_params(rng, (784, 1000, 1000, 10), device)
    x = dualflow.tensor(rng.standard_normal((batch, 784), dtype=np.float32), device=device)
    labels = dualflow.tensor(rng.integers(0, 10, size=batch), device=device)
    opt = optim.SGD(params, lr=0.01)
    scaler = GradScaler(device=device)

    def step() -> Any:
        opt.zero_grad()
        with autocast(device.kind, dtype="float16"):
            loss = ops.softmax_cross_entropy(_mlp_forward(x, params), labels)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    return {"step": step, "params": params}
