"""The benchmark workloads: each builds its state once and exposes one ``step()`` to time.

A workload is written with public dualflow APIs only, exactly as a user would write it, so the
numbers measure what users get. ``baseline`` (optional) times the irreducible part (e.g. the GEMMs).
Every builder takes ``(rng, device)`` and puts its tensors and modules on that device.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import dualflow
from dualflow import nn, ops, optim
from dualflow.bench.distributed import distributed_rows
from dualflow.bench.elementwise_workloads import (
    build_arith_chain,
    build_elementwise,
    build_elementwise_64m,
    build_poly_chain,
    build_sum_of_squares,
)
from dualflow.bench.func_workloads import build_per_example_grads
from dualflow.bench.harness import Measurement
from dualflow.bench.lm_workloads import build_lstm_lm, build_transformer_lm
from dualflow.bench.memory_workloads import (
    build_mlp_autocast,
    build_resnet18_b64,
    build_resnet18_checkpoint,
    build_resnet18_remat,
)
from dualflow.bench.shape_rows import rows_of
from dualflow.bench.shape_workloads import (
    build_variable_batch,
    build_variable_batch_infer,
    build_variable_seq,
)
from dualflow.bench.vision_workloads import (
    build_cnn,
    build_resnet18,
    build_resnet50,
    build_small_cnn,
    sgd_step,
)
from dualflow.device import CPU, Device
from dualflow.tracer.lazy_choice import LazyOrEager

GPU_SCALE = "gpu-scale"  # tag: too big for the CPU default set; runs by name or on a GPU


@dataclass
class Workload:
    """A named benchmark: ``build(rng, device)`` returns the ``step`` callable and extras.

    The extras: ``params`` (compared across modes), ``baseline`` (a callable timed alongside)
    and ``bytes`` (what a fused kernel must read and write per step, for GB/s); ``inputs`` (the
    step's input tensors, for tests). A workload that measures itself (e.g. in other processes)
    has ``rows(repeats, seed)`` instead, returning its table rows; ``build`` is then None
    (``rows(repeats, seed, device)`` when ``on_device``: it measures on the bench's device).
    """

    name: str
    description: str
    build: Callable[[np.random.Generator, Device], dict[str, Any]] | None
    quick_repeats: int = 200
    tags: tuple[str, ...] = field(default_factory=tuple)
    rows: Callable[..., list[Measurement]] | None = None
    # untimed calls first: a compiled step traces (and may retrace) in these, and a
    # compiled-lazy one makes its first lazy-or-eager choice (its probe's calls alternate two
    # paths of different speeds: timed, they would be a spread of the mode's own making); its
    # first calls compile plans, which restarts the warm count once: twice the warm calls. The
    # probe ends on the chosen path, whose first calls after the other path's are still slow
    # (poly-chain's lazy 1.6, 1.4, 1.0, then 0.85 ms): two more calls settle it
    warmup: int = 2 * LazyOrEager.WARM_CALLS + 4 * LazyOrEager.PROBES + 2
    held: bool = False  # compiled rows also measure what a fresh compiled step keeps
    on_device: bool = False  # ``rows`` takes the device (else it runs on the CPU only)


def _tiny_chain(x: Any, w: Any) -> Any:
    # The peers' 50 tiny ops: 10 x [*0.9, +0.1, tanh, *w, sigmoid], then a sum.
    h = x
    for _ in range(10):
        h = ops.sigmoid(ops.tanh(h * 0.9 + 0.1) * w)
    return h.sum()


def _randn(rng: np.random.Generator, shape: Any, device: Device, grad: bool = False) -> Any:
    value = rng.normal(size=shape).astype(np.float32)
    return dualflow.tensor(value, device=device, requires_grad=grad)


def build_tiny_ops(rng: np.random.Generator, device: Device = CPU) -> dict[str, Any]:
    """50 elementwise ops on 16x16 float32 and the gradients wrt both inputs (dispatch overhead).

    Example:
        >>> [g.shape for g in build_tiny_ops(np.random.default_rng(0))["step"]()]
        [(16, 16), (16, 16)]
    """
    x, w = _randn(rng, (16, 16), device, True), _randn(rng, (16, 16), device, True)

    def step() -> Any:
        return dualflow.grad(_tiny_chain(x, w), [x, w])  # the peers' autograd.grad((x, w))

    return {"step": step, "params": [x, w]}


def build_tiny_ops_forward(rng: np.random.Generator, device: Device = CPU) -> dict[str, Any]:
    """The same 50-op chain, forward only under no_grad.

    Example:
        >>> build_tiny_ops_forward(np.random.default_rng(0))["step"]().shape
        ()
    """
    x, w = _randn(rng, (16, 16), device), _randn(rng, (16, 16), device)

    def step() -> Any:
        with dualflow.no_grad():
            return _tiny_chain(x, w)

    return {"step": step, "params": []}


def _mlp_params(rng: np.random.Generator, sizes: tuple[int, ...], device: Device) -> list[Any]:
    params = []
    for fan_in, fan_out in itertools.pairwise(sizes):
        bound = 1.0 / np.sqrt(fan_in)  # PyTorch's Linear default range
        w = rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32)
        b = rng.uniform(-bound, bound, (fan_out,)).astype(np.float32)
        params += [dualflow.tensor(v, device=device, requires_grad=True) for v in (w, b)]
    return params


def _mlp_forward(x: Any, params: list[Any]) -> Any:
    # linear layers with ReLU between them (none after the last): the peers' MLP
    h = x
    for i in range(0, len(params), 2):
        h = ops.linear(h, params[i], params[i + 1])
        if i + 2 < len(params):
            h = ops.relu(h)
    return h


def build_mlp(rng: np.random.Generator, device: Device = CPU, batch: int = 64) -> dict[str, Any]:
    """MLP 784-1000-1000-10 training step (forward, backward, SGD update) at ``batch``.

    Example:
        >>> build_mlp(np.random.default_rng(0), batch=2)["step"]().shape
        ()
    """
    params = _mlp_params(rng, (784, 1000, 1000, 10), device)
    x = _randn(rng, (batch, 784), device)
    labels = dualflow.tensor(rng.integers(0, 10, size=batch), device=device)

    def step() -> Any:
        return sgd_step(ops.softmax_cross_entropy(_mlp_forward(x, params), labels), params, 0.01)

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


def build_inference(rng: np.random.Generator, device: Device = CPU) -> dict[str, Any]:
    """A 20-layer MLP of width 512, batch 64, forward only under no_grad.

    Example:
        >>> build_inference(np.random.default_rng(0))["step"]().shape
        (64, 512)
    """
    params = _mlp_params(rng, (512,) * 21, device)
    x = _randn(rng, (64, 512), device)

    def step() -> Any:
        with dualflow.no_grad():
            h = x
            for i in range(0, len(params), 2):
                h = ops.relu(ops.linear(h, params[i], params[i + 1]))
            return h

    return {"step": step, "params": params}


PENALTY_WEIGHT = 10.0  # WGAN-GP's lambda


def build_gradient_penalty(
    rng: np.random.Generator, device: Device = CPU, batch: int = 64, features: int = 128
) -> dict[str, Any]:
    """A WGAN-GP critic step: the penalty ``(||d critic / d x|| - 1)^2`` needs double backward.

    Example:
        >>> build_gradient_penalty(np.random.default_rng(0), batch=4, features=8)["step"]().shape
        ()
    """
    dualflow.random.seed(int(rng.integers(2**31)))  # the same critic in every mode
    critic = nn.Sequential(
        nn.Linear(features, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 1)
    ).to_device(device)
    opt = optim.Adam(list(critic.params()), lr=1e-4, betas=(0.5, 0.9))
    real = dualflow.tensor(
        rng.normal(1.0, 1.0, (batch, features)).astype(np.float32), device=device
    )
    fake = _randn(rng, (batch, features), device)
    eps = dualflow.tensor(rng.uniform(size=(batch, 1)).astype(np.float32), device=device)

    def step() -> Any:
        opt.zero_grad()
        mixed = (eps * real + (1 - eps) * fake).requires_grad_()
        (grad_x,) = dualflow.grad(critic(mixed).sum(), [mixed], create_graph=True)
        norm = ops.sqrt((grad_x * grad_x).sum(axis=1) + 1e-12)
        penalty = ((norm - 1.0) ** 2).mean()
        loss = critic(fake).mean() - critic(real).mean() + PENALTY_WEIGHT * penalty
        loss.backward()  # second order: through grad_x into the critic's weights
        opt.step()
        return loss

    return {"step": step, "params": list(critic.params())}


def build_gradient_penalty_mlp(
    rng: np.random.Generator, device: Device = CPU, batch: int = 64, hidden: int = 1000
) -> dict[str, Any]:
    """Double backward through the MLP 784-``hidden``-``hidden``-10 (ReLU) at ``batch``:
    ``g = d sum(f(x)) / dx``, then the gradients of ``sum(g**2)`` wrt the parameters (zeros for
    the biases feeding a ReLU, None for the last: ``g`` does not depend on them, ReLU's second
    derivative being zero; PyTorch gives the same).

    Example:
        >>> built = build_gradient_penalty_mlp(np.random.default_rng(0), batch=2, hidden=8)
        >>> [None if g is None else g.shape for g in built["step"]()]
        [(8, 784), (8,), (8, 8), (8,), (10, 8), None]
    """
    params = _mlp_params(rng, (784, hidden, hidden, 10), device)
    x = _randn(rng, (batch, 784), device, True)

    def step() -> Any:
        (g,) = dualflow.grad(_mlp_forward(x, params).sum(), [x], create_graph=True)
        return dualflow.grad((g**2).sum(), params, allow_unused=True)

    return {"step": step, "params": params, "inputs": [x]}


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in [
        Workload("tiny-ops", "50 elementwise ops on 16x16, fwd+bwd", build_tiny_ops, 300),
        Workload("tiny-ops-fwd", "same chain, forward only (no grad)", build_tiny_ops_forward, 300),
        Workload("mlp", "MLP 784-1000-1000-10 train step, batch 64", build_mlp, 30),
        Workload("elementwise", "tanh(x*0.5+1)*sigmoid(x)-x**2, 4M f32", build_elementwise, 10),
        Workload("arith-chain", "12 arithmetic ops with a maximum, 4M f32", build_arith_chain, 10),
        Workload("poly-chain", "(x*0.5+1)*(x-2) - x*x, 4M f32", build_poly_chain, 10),
        Workload("sum-of-squares", "((x - y) ** 2).sum(), 4M f32", build_sum_of_squares, 10),
        Workload(
            "inference", "20x512 MLP forward (no grad), batch 64", build_inference, 50, held=True
        ),
        Workload("cnn", "digits CNN train step, batch 64", build_cnn, 20),
        Workload("small-cnn", "3-conv CNN train step, batch 32 x 3x32x32", build_small_cnn, 10),
        # full-width ResNet-18 takes ~1 s a step on 2 cores: 5 repeats (with 3 the median was
        # noise); a compiled step traces on call 1 and retraces on call 2 (momentum buffers
        # appear), so warm up twice
        Workload("resnet18", "ResNet-18 CIFAR train step, batch 16", build_resnet18, 5, warmup=2),
        Workload(
            "transformer-lm",
            "Transformer encoder LM train step: 2 layers, d 256, 4 heads, 16x64 tokens, Adam",
            build_transformer_lm,
            10,
        ),
        Workload(
            "lstm-lm",
            "2-layer LSTM LM train step: hidden 256, 16x64 tokens, vocab 1000, Adam",
            build_lstm_lm,
            10,
        ),
        # issue 42's memory rows: the same step at batch 64, plain, checkpointed, remat
        Workload(
            "resnet18-b64",
            "the resnet18 step at batch 64 (the baseline of the next two rows)",
            build_resnet18_b64,
            5,
            warmup=2,
        ),
        Workload(
            "resnet18-checkpoint",
            "resnet18-b64 with checkpoint_sequential over its 4 stages (recomputed in backward)",
            build_resnet18_checkpoint,
            5,
            warmup=2,
        ),
        Workload(
            "resnet18-remat",
            "resnet18-b64 compiled with memory_budget=0.5 (recomputed in backward)",
            build_resnet18_remat,
            5,
            warmup=2,
        ),
        Workload(
            "mlp-autocast",
            "the mlp step under float16 autocast + GradScaler (numpy float16 has no BLAS)",
            build_mlp_autocast,
            5,
        ),
        Workload("gradient-penalty", "WGAN-GP critic step, 64x128", build_gradient_penalty, 20),
        Workload(
            "gradient-penalty-mlp",
            "double backward through the MLP 784-1000-1000-10, batch 64",
            build_gradient_penalty_mlp,
            20,
        ),
        Workload(
            "per-example-grads",
            "vmap(grad) per-example grads, MLP 784-128-10, batch 64 (baseline: a Python loop)",
            build_per_example_grads,
            20,
        ),
        Workload(
            "distributed",
            "digits CNN data-parallel step, 2 MPI ranks x batch 64",
            None,
            20,
            rows=distributed_rows,
        ),
        Workload(
            "elementwise-64m",
            "the elementwise chain on 64M f32, with GB/s",
            build_elementwise_64m,
            10,
            tags=(GPU_SCALE,),
        ),
        Workload(
            "resnet50",
            "ResNet-50 train step, batch 64 x 3x224x224",
            build_resnet50,
            3,
            tags=(GPU_SCALE,),
            warmup=2,
        ),
        *(
            # issue 39: a step is one pass over 40 sizes (peers.shape_sizes), one call each
            Workload(name, text, None, passes, rows=rows_of(name, build), warmup=1, on_device=True)
            for name, text, build, passes in (
                (
                    "variable-batch",
                    "MLP 784-256-10 train step (SGD), 40 calls at batch sizes 1..128",
                    build_variable_batch,
                    3,
                ),
                (
                    "variable-seq",
                    "Transformer LM step (d 64, 1 layer, Adam), 40 calls at 4 x 5..60 tokens",
                    build_variable_seq,
                    1,
                ),
                (
                    "variable-batch-infer",
                    "small CNN inference (no grad), 40 calls at batch sizes 1..16",
                    build_variable_batch_infer,
                    3,
                ),
            )
        ),
    ]
}

ALIASES = {"inference-mlp": "inference"}  # the workload's name before it was renamed


def default_workloads(device: Device = CPU) -> list[str]:
    """The workloads run without ``--workloads``: all on a GPU, the CPU-sized ones on the CPU.

    Example:
        >>> "resnet50" in default_workloads(), "resnet50" in default_workloads(Device("cuda:0"))
        (False, True)
    """
    return [n for n, w in WORKLOADS.items() if device.kind != "cpu" or GPU_SCALE not in w.tags]


def resolve_names(text: str) -> tuple[list[str], list[str]]:
    """``(known, unknown)`` workload names of a comma-separated list, aliases resolved.

    Example:
        >>> resolve_names("mlp, inference-mlp,nope")
        (['mlp', 'inference'], ['nope'])
    """
    names = [ALIASES.get(n.strip(), n.strip()) for n in text.split(",") if n.strip()]
    known = list(dict.fromkeys(n for n in names if n in WORKLOADS))
    return known, [n for n in names if n not in WORKLOADS]
