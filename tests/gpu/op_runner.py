"""Run one op-table sample on a device and bring everything back to numpy: forward outputs,
first-order gradients (random output cotangents) and double-backward gradients, so the CUDA
results can be compared with the CPU's computed the same way from the same seeds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

import dualflow
from dualflow import ops
from dualflow.device import send
from dualflow.tensor.random import Generator
from tests.opinfo import OpInfo, Sample


def _dropout(x: Any, ratio: float = 0.4) -> Any:
    # The table's entry draws from a CPU generator; the device's own generator with the same
    # seed gives the same mask (the counter-based draws are device-independent).
    return ops.dropout(x, ratio, train=True, generator=Generator(5, device=x.device))


def _assign(target: Any, value: Any) -> Any:
    # The table's entry copies the target through numpy; copy it on its own device instead.
    return ops.assign(dualflow.tensor(target), value)


# Entries whose test function is tied to the CPU, replaced by the same computation on any device.
DEVICE_FNS = {"dropout": _dropout, "assign": _assign}


@dataclass
class Result:
    """Host copies of what one sample produced on one device (None: no gradient there)."""

    outputs: list[np.ndarray]
    devices: set[str]  # where the output tensors lived
    grads: list[np.ndarray | None] = field(default_factory=list)
    double: list[np.ndarray | None] = field(default_factory=list)


def _host(value: Any) -> np.ndarray:
    if isinstance(value, dualflow.Tensor):
        return value.numpy()
    return np.asarray(send(value, "cpu"))


def _positions(info: OpInfo, sample: Sample) -> tuple[int, ...]:
    if not info.differentiable:
        return ()
    if sample.grad is not None:
        return sample.grad
    return tuple(
        i for i, v in enumerate(sample.inputs) if isinstance(v, np.ndarray) and v.dtype.kind == "f"
    )


def _seeds(like: list[dualflow.Tensor], seed: int, device: str) -> list[dualflow.Tensor]:
    """Random tensors shaped like ``like``: identical values for every device (same seed)."""
    rng = np.random.default_rng(seed)
    return [
        dualflow.tensor(rng.standard_normal(t.shape).astype(t.dtype), device=device) for t in like
    ]


def place(sample: Sample, dtype: Any, device: str, positions: tuple[int, ...]) -> tuple:
    """``(args, leaves)``: float arrays as ``dtype`` tensors on ``device`` (those at
    ``positions`` require grad), other arrays (labels, masks, keys) as raw device arrays."""
    args: list[Any] = []
    leaves = []
    for i, value in enumerate(sample.inputs):
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            t = dualflow.tensor(value.astype(dtype), device=device, requires_grad=i in positions)
            leaves += [t] if i in positions else []
            args.append(t)
        elif isinstance(value, np.ndarray):
            args.append(send(value, device))
        else:
            args.append(value)
    return args, leaves


def run_sample(info: OpInfo, sample: Sample, dtype: Any, device: str) -> Result:
    """Forward, gradients and (where the entry has them) double-backward gradients on ``device``."""
    positions = _positions(info, sample)
    args, leaves = place(sample, dtype, device, positions)
    out = DEVICE_FNS.get(info.name, info.fn)(*args, **sample.kwargs)
    outs = list(out) if isinstance(out, tuple | list) else [out]
    devices = {str(o.device) for o in outs if isinstance(o, dualflow.Tensor)}
    result = Result([_host(o) for o in outs], devices)
    live = [o for o in outs if isinstance(o, dualflow.Tensor) and o.requires_grad]
    if not (leaves and live):
        return result
    double = info.double_differentiable
    gys = _seeds(live, 1, device)
    grads = dualflow.grad(live, leaves, gys, create_graph=double, allow_unused=True)
    result.grads = [None if g is None else g.numpy() for g in grads]
    second = [g for g in grads if g is not None and g.requires_grad]
    if double and second:
        total = sum((g * v).sum() for g, v in zip(second, _seeds(second, 2, device)))
        again = dualflow.grad(total, leaves, allow_unused=True)
        result.double = [None if g is None else g.numpy() for g in again]
    return result
