"""Compiled graphs on ``cuda:0``: a fused elementwise chain and the digits-CNN training step
(``examples/train_digits_cnn.py``'s model, Adam, dropout, batch norm) match eager on the GPU, the
GPU matches the CPU, and the fused plan's memory-pool peak is measured against eager's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import Device, ops, optim
from dualflow.data import load_digits
from dualflow.vision.models.digits_cnn import digits_cnn

pytestmark = pytest.mark.gpu
CUDA = Device("cuda:0")
MiB = 2**20


def _chain(x: dualflow.Tensor, y: dualflow.Tensor) -> dualflow.Tensor:
    return ops.tanh(x * 0.5 + 1.0) * ops.sigmoid(x) - x**2 + ops.exp(-ops.abs(y)) * 0.25


def _inputs(n: int) -> tuple[dualflow.Tensor, dualflow.Tensor]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    return dualflow.tensor(x, device=CUDA), dualflow.tensor(x[::-1].copy(), device=CUDA)


def _last_plan(compiled: Any) -> Any:
    return compiled.history[-1].plan


def test_fused_chain_compiled_matches_eager_on_gpu(cupy) -> None:
    x, y = _inputs(1 << 20)
    compiled = dualflow.compile(_chain)
    for _ in range(3):  # trace, then two plan runs
        got = compiled(x, y)
    want = _chain(x, y)
    assert got.device == CUDA and got.dtype == np.float32 and isinstance(got.array, cupy.ndarray)
    assert compiled.stats().plan_runs == 2 and compiled.stats().eager_fallbacks == 0
    plan = _last_plan(compiled)
    assert plan.device == CUDA
    assert [n.op for n in plan.graph.nodes] == ["fused"]  # one generated ElementwiseKernel
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(want.numpy(), _chain(*(t.to_device("cpu") for t in (x, y))).numpy(),
                               rtol=2e-6, atol=2e-6)  # fmt: skip


def _pool_peak(cupy: Any, fn: Callable[[], Any]) -> int:
    """The high-water mark of bytes held from cupy's pool while ``fn`` runs (above the start)."""

    class HighWater(cupy.cuda.MemoryHook):
        name = "dualflow-test-high-water"

        def __init__(self) -> None:
            self.held = self.peak = 0

        def malloc_postprocess(self, **kwargs: Any) -> None:
            self.held += kwargs["mem_size"]
            self.peak = max(self.peak, self.held)

        def free_postprocess(self, **kwargs: Any) -> None:
            self.held -= kwargs["mem_size"]

    cupy.cuda.Device(CUDA.index).synchronize()
    hook = HighWater()
    with hook:
        fn()
        cupy.cuda.Device(CUDA.index).synchronize()
    return hook.peak


def test_fused_plan_peak_memory_is_one_output(cupy, record_property: Any) -> None:
    n = 1 << 22  # 16 MiB of float32 per array
    x, y = _inputs(n)
    compiled = dualflow.compile(_chain)
    compiled(x, y), compiled(x, y)  # trace, then the plan's first run allocates its buffers
    eager = _pool_peak(cupy, lambda: _chain(x, y))
    graph = _pool_peak(cupy, lambda: compiled(x, y))
    predicted = _last_plan(compiled).predicted_peak
    record_property("eager_peak_mib", eager / MiB)
    record_property("compiled_peak_mib", graph / MiB)
    record_property("predicted_peak_mib", predicted / MiB)
    out = 4 * n
    assert out <= graph <= predicted + MiB, (graph, predicted)  # the output, nothing else
    assert eager >= 2 * out, eager  # unfused: temporaries alive at once


def _train(device: Device, compiled: bool, steps: int = 6) -> tuple[list, dict, Any]:
    """``steps`` Adam steps of the digits CNN (dropout on, batch norm training) on ``device``."""
    dualflow.random.seed(0)  # same initial parameters and dropout masks for every run
    model = digits_cnn(dropout=0.25).to_device(device)
    optimizer = optim.Adam(list(model.params()), lr=3e-3)

    def step(x: dualflow.Tensor, y: dualflow.Tensor) -> dualflow.Tensor:
        optimizer.zero_grad()
        loss = ops.softmax_cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    run = dualflow.compile(step) if compiled else step
    images, labels = load_digits("train")
    losses = []
    for i in range(steps):
        batch = slice(32 * i, 32 * (i + 1))
        x = dualflow.tensor(images[batch], device=device)
        loss = run(x, dualflow.tensor(labels[batch], device=device))
        assert loss.device == device
        losses.append(loss.item())
    return losses, {k: v.numpy() for k, v in model.state_dict().items()}, run


def _assert_close(a: tuple, b: tuple, rtol: float, atol: float) -> None:
    np.testing.assert_allclose(a[0], b[0], rtol=rtol, atol=atol, err_msg="losses")
    for name in a[1]:
        np.testing.assert_allclose(a[1][name], b[1][name], rtol=rtol, atol=atol, err_msg=name)


def test_training_step_compiled_matches_eager_on_gpu() -> None:
    eager = _train(CUDA, compiled=False)
    graph = _train(CUDA, compiled=True)
    stats = graph[2].stats()
    assert stats.plan_runs >= 3 and stats.eager_fallbacks == 0, stats
    assert _last_plan(graph[2]).device == CUDA
    assert eager[0][-1] < eager[0][0]  # it trains
    _assert_close(graph, eager, rtol=1e-4, atol=1e-5)


def test_training_step_on_gpu_matches_cpu() -> None:
    cpu = _train(Device("cpu"), compiled=False)
    gpu = _train(CUDA, compiled=False)
    _assert_close(gpu, cpu, rtol=1e-3, atol=1e-4)  # float32 sums in another order
