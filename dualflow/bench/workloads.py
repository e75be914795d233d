"""The benchmark workloads: each builds its state once and exposes one ``step()`` to time.

A workload is written with public dualflow APIs only, exactly as a user would write it, so the
numbers measure what users get. ``baseline`` (optional) times the irreducible part (e.g. the GEMMs).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import dualflow
import dualflow.data
from dualflow import ops
from dualflow.bench.distributed import distributed_rows
from dualflow.bench.harness import Measurement


@dataclass
class Workload:
    """A named benchmark: ``build(rng)`` returns the ``step`` callable (and optional extras).

    A workload that measures itself (e.g. in other processes) has ``rows(repeats, seed)``
    instead, returning its table rows; ``build`` is then None.
    """

    name: str
    description: str
    build: Callable[[np.random.Generator], dict[str, Any]] | None
    quick_repeats: int = 200
    tags: tuple[str, ...] = field(default_factory=tuple)
    rows: Callable[[int, int], list[Measurement]] | None = None


def _tiny_chain(x: Any, w: Any) -> Any:
    # 50 tiny elementwise ops mixing binary, unary and scalar operands.
    h = x
    for i in range(50):
        kind = i % 5
        if kind == 0:
            h = h * w
        elif kind == 1:
            h = h + w
        elif kind == 2:
            h = ops.tanh(h)
        elif kind == 3:
            h = h - 0.5
        else:
            h = ops.sigmoid(h)
    return h.sum()


def build_tiny_ops(rng: np.random.Generator) -> dict[str, Any]:
    """50 elementwise ops on 16x16 float32, forward + backward."""
    x = dualflow.tensor(rng.normal(size=(16, 16)).astype(np.float32), requires_grad=True)
    w = dualflow.tensor(rng.normal(size=(16, 16)).astype(np.float32), requires_grad=True)

    def step() -> Any:
        x.grad = w.grad = None
        loss = _tiny_chain(x, w)
        loss.backward()
        return loss

    return {"step": step, "params": [x, w]}


def build_tiny_ops_forward(rng: np.random.Generator) -> dict[str, Any]:
    """The same 50-op chain, forward only under no_grad."""
    x = dualflow.tensor(rng.normal(size=(16, 16)).astype(np.float32))
    w = dualflow.tensor(rng.normal(size=(16, 16)).astype(np.float32))

    def step() -> Any:
        with dualflow.no_grad():
            return _tiny_chain(x, w)

    return {"step": step, "params": []}


def _mlp_params(rng: np.random.Generator, sizes: tuple[int, ...]) -> list[Any]:
    params = []
    for fan_in, fan_out in itertools.pairwise(sizes):
        bound = 1.0 / np.sqrt(fan_in)  # PyTorch's Linear default range
        w = rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32)
        b = rng.uniform(-bound, bound, (fan_out,)).astype(np.float32)
        params += [dualflow.tensor(w, requires_grad=True), dualflow.tensor(b, requires_grad=True)]
    return params


def _cross_entropy(logits: Any, labels: np.ndarray) -> Any:
    return ops.softmax_cross_entropy(logits, labels)


def build_mlp(rng: np.random.Generator, batch: int = 64) -> dict[str, Any]:
    """MLP 784-1000-1000-10 training step (forward, backward, SGD update) at ``batch``."""
    params = _mlp_params(rng, (784, 1000, 1000, 10))
    x = dualflow.tensor(rng.normal(size=(batch, 784)).astype(np.float32))
    labels = rng.integers(0, 10, size=batch)

    def step() -> Any:
        h = x
        for i in range(0, len(params), 2):
            h = ops.linear(h, params[i], params[i + 1])
            if i + 2 < len(params):
                h = ops.relu(h)
        loss = _cross_entropy(h, labels)
        for p in params:
            p.grad = None
        loss.backward()
        with dualflow.no_grad():
            for p in params:
                ops.assign(p, p - 0.01 * p.grad)
        return loss

    def gemms_only() -> None:
        # The 8 GEMMs of the step (3 forward, 5 backward: no gradient for the input).
        ws = [p.array for p in params[::2]]
        a1 = x.array @ ws[0].T
        a2 = a1 @ ws[1].T
        a3 = a2 @ ws[2].T
        g2 = a3 @ ws[2]
        _ = a3.T @ a2
        g1 = g2 @ ws[1]
        _ = g2.T @ a1
        _ = g1.T @ x.array

    return {"step": step, "params": params, "baseline": gemms_only}


BIG = 4 * 1024 * 1024  # elements of the large elementwise workloads (4M float32, 16 MiB)


def build_elementwise(rng: np.random.Generator) -> dict[str, Any]:
    """``tanh(x*0.5+1)*sigmoid(x) - x**2`` on 4M float32, forward only under no_grad."""
    x = dualflow.tensor(rng.normal(size=BIG).astype(np.float32))

    def step() -> Any:
        with dualflow.no_grad():
            return ops.tanh(x * 0.5 + 1) * ops.sigmoid(x) - x**2

    return {"step": step, "params": []}


def build_arith_chain(rng: np.random.Generator) -> dict[str, Any]:
    """An arithmetic-only 12-op chain (with a ``maximum``) on 4M float32, forward only."""
    x = dualflow.tensor(rng.normal(size=BIG).astype(np.float32))

    def step() -> Any:
        with dualflow.no_grad():
            h = ((x * 1.5 + 2.0) * x - 0.5) / (x * x + 1.0)
            h = ops.maximum(h * 0.75 - x * 0.25, 0.0)
            return h * h + x * 0.125

    def copy_only() -> None:
        # the memory-bandwidth floor: one read and one write of 16 MiB
        np.copy(x.array)

    return {"step": step, "params": [], "baseline": copy_only}


def build_inference_mlp(rng: np.random.Generator) -> dict[str, Any]:
    """A 20-layer MLP of width 512, batch 64, forward only under no_grad."""
    params = _mlp_params(rng, (512,) * 21)
    x = dualflow.tensor(rng.normal(size=(64, 512)).astype(np.float32))

    def step() -> Any:
        with dualflow.no_grad():
            h = x
            for i in range(0, len(params), 2):
                h = ops.relu(ops.linear(h, params[i], params[i + 1]))
            return h

    return {"step": step, "params": params}


def _cnn_params(rng: np.random.Generator) -> list[Any]:
    def tensor(shape: tuple[int, ...], scale: float = 0.0, fill: float = 0.0) -> Any:
        value = rng.normal(0, scale, shape) if scale else np.full(shape, fill)
        return dualflow.tensor(value.astype(np.float32), requires_grad=True)

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


def build_cnn(rng: np.random.Generator, batch: int = 64) -> dict[str, Any]:
    """Digits CNN train step: (conv3x3 + batch_norm + relu + max_pool) x2 + linear, SGD."""
    images, labels = dualflow.data.load_digits("train")
    pick = rng.choice(len(labels), batch, replace=False)
    x, y = dualflow.tensor(images[pick]), labels[pick]
    params = _cnn_params(rng)

    def step() -> Any:
        h = x
        for i in (0, 4):
            w, b, gamma, beta = params[i : i + 4]
            h = ops.conv2d(h, w, b, pad=1)
            h = ops.max_pool2d(ops.relu(ops.batch_norm(h, gamma, beta)), 2)
        loss = _cross_entropy(ops.linear(ops.flatten(h), params[8], params[9]), y)
        for p in params:
            p.grad = None
        loss.backward()
        with dualflow.no_grad():
            for p in params:
                ops.assign(p, p - 0.05 * p.grad)
        return loss

    return {"step": step, "params": params}


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in [
        Workload("tiny-ops", "50 elementwise ops on 16x16, fwd+bwd", build_tiny_ops, 300),
        Workload("tiny-ops-fwd", "same chain, forward only (no grad)", build_tiny_ops_forward, 300),
        Workload("mlp", "MLP 784-1000-1000-10 train step, batch 64", build_mlp, 30),
        Workload("elementwise", "tanh(x*0.5+1)*sigmoid(x)-x**2, 4M f32", build_elementwise, 10),
        Workload("arith-chain", "12 arithmetic ops with a maximum, 4M f32", build_arith_chain, 10),
        Workload("inference-mlp", "20x512 MLP forward, batch 64", build_inference_mlp, 50),
        Workload("cnn", "digits CNN train step, batch 64", build_cnn, 20),
        Workload(
            "distributed",
            "digits CNN data-parallel step, 2 MPI ranks x batch 64",
            None,
            20,
            rows=distributed_rows,
        ),
    ]
}
