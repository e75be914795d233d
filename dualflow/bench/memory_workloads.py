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


PEAK_GOAL, TIME_GOAL = 0.40, 1.35  # issue 42: >= 40% lower peak at <= 1.35x the step time


def memory_goal_lines(rows: list[Any]) -> list[str]:
    """Issue 42's goal per memory row and mode, against the ``resnet18-b64`` row of that mode:
    peak change and step-time ratio (medians, and minima: the less noisy on a busy machine).

    Example:
        >>> from dualflow.bench.harness import Measurement
        >>> rows = [Measurement("resnet18-b64", "compiled", 100.0, 90.0, 110.0, 5, 400),
        ...         Measurement("resnet18-remat", "compiled", 120.0, 117.0, 125.0, 5, 200)]
        >>> memory_goal_lines(rows)[1]
        '  resnet18-remat compiled: peak -50% (400 B -> 200 B), time 1.20x median, 1.30x min: met'
    """
    base = {r.mode: r for r in rows if r.workload == "resnet18-b64" and r.repeats}
    lines = []
    for r in rows:
        plain = base.get(r.mode)
        if r.workload not in ("resnet18-checkpoint", "resnet18-remat") or not r.repeats:
            continue
        if plain is None or (r.workload == "resnet18-remat" and r.mode != "compiled"):
            continue  # the remat row's budget reaches compiled steps only
        saved = 1.0 - r.peak_bytes / plain.peak_bytes
        slower = r.ms_median / plain.ms_median, r.ms_min / plain.ms_min
        met = saved >= PEAK_GOAL and min(slower) <= TIME_GOAL
        lines.append(
            f"  {r.workload} {r.mode}: peak {-100 * saved:+.0f}% ({_size(plain.peak_bytes)} -> "
            f"{_size(r.peak_bytes)}), time {slower[0]:.2f}x median, {slower[1]:.2f}x min: "
            f"{'met' if met else 'not met'}"
        )
    head = f"issue 42 (>= {PEAK_GOAL:.0%} lower peak at <= {TIME_GOAL}x, vs resnet18-b64):"
    return [head, *lines] if lines else []


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**20:.1f} MiB" if nbytes >= 2**20 else f"{nbytes} B"
