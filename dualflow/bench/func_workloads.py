"""The functional-transform workload: per-example gradients of a 2-layer MLP by
``vmap(grad)``, with a Python loop of per-example ``dualflow.grad`` calls as its baseline
(``--peers``: torch.func's ``vmap(grad)``, the issue's goal)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

import dualflow
from dualflow import func, ops
from dualflow.device import CPU, Device

SIZES = (784, 128, 10)


def _forward(params: list[Any], x: Any) -> Any:
    w1, b1, w2, b2 = params
    return ops.linear(ops.relu(ops.linear(x, w1, b1)), w2, b2)


def _example_loss(params: list[Any], x: Any, label: Any) -> Any:
    logits = _forward(params, ops.reshape(x, (1, -1)))
    return ops.softmax_cross_entropy(logits, ops.reshape(label, (1,)))


def build_per_example_grads(
    rng: np.random.Generator, device: Device = CPU, batch: int = 64
) -> dict[str, Any]:
    """Per-example gradients of the MLP 784-128-10 (ReLU, softmax cross-entropy) at ``batch``:
    ``vmap(grad(loss), in_dims=(None, 0, 0))``; the baseline loops ``dualflow.grad`` in Python.

    Example:
        >>> grads = build_per_example_grads(np.random.default_rng(0), batch=3)["step"]()
        >>> [tuple(g.shape) for g in grads]
        [(3, 128, 784), (3, 128), (3, 10, 128), (3, 10)]
    """
    params = []
    for fan_in, fan_out in itertools.pairwise(SIZES):
        bound = 1.0 / np.sqrt(fan_in)  # PyTorch's Linear default range
        for shape in ((fan_out, fan_in), (fan_out,)):
            value = rng.uniform(-bound, bound, shape).astype(np.float32)
            params.append(dualflow.tensor(value, device=device))
    x = dualflow.tensor(rng.normal(size=(batch, SIZES[0])).astype(np.float32), device=device)
    labels = dualflow.tensor(rng.integers(0, SIZES[-1], size=batch), device=device)
    per_example = func.vmap(func.grad(_example_loss), in_dims=(None, 0, 0))

    def step() -> Any:
        return per_example(params, x, labels)

    leaves = [p.detach().requires_grad_(True) for p in params]

    def python_loop() -> None:
        for b in range(batch):
            dualflow.grad(_example_loss(leaves, x[b], labels[b]), leaves)

    return {"step": step, "params": params, "baseline": python_loop, "inputs": [x, labels]}
