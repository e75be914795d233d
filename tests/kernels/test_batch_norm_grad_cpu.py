"""The numba batch-norm backward kernel (kernels/norm/batch_norm_grad.py): the three gradients
against a float64 reference over drawn shapes (float32 and float64); the same bits whatever the
inputs' memory layout and on one or two threads; which arrays it takes; and a conv/BN/ReLU
train step whose backward runs it, compiled equal to eager, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from dualflow import ops
from dualflow.background.process import using_threads
from dualflow.kernels.backend import host_kernels
from dualflow.kernels.base.cpu_threads import split
from dualflow.kernels.norm import batch_norm, batch_norm_grad, crew_rows
from dualflow.ops import OPS
from tests.kernels.conv_bn_step import assert_compiled_equals_eager, drawn_inputs

TOL = {np.float32: 5e-5, np.float64: 1e-11}


def _reference(gy, x, gamma, mean, var, eps: float) -> tuple:
    """(gx, ggamma, gbeta) in float64, the statistics as given."""
    gy64, x64, axes = gy.astype(np.float64), x.astype(np.float64), (0, *range(2, x.ndim))
    shape, n = (1, -1) + (1,) * (x.ndim - 2), x.size // x.shape[1]
    s = 1.0 / np.sqrt(var.astype(np.float64) + eps)
    xhat = (x64 - mean.reshape(shape)) * s.reshape(shape)
    gbeta, ggamma = gy64.sum(axis=axes), (gy64 * xhat).sum(axis=axes)
    centered = gy64 - (gbeta / n).reshape(shape) - xhat * (ggamma / n).reshape(shape)
    return (gamma * s).reshape(shape) * centered, ggamma, gbeta


def _inputs(rng: np.random.Generator, shape: tuple, dtype: type) -> tuple:
    x = (rng.standard_normal(shape) * 3 + rng.uniform(-5, 5)).astype(dtype)
    gy = rng.standard_normal(shape).astype(dtype)
    axes = (0, *range(2, x.ndim))
    gamma = rng.standard_normal(shape[1]).astype(dtype)
    return gy, x, gamma, x.mean(axis=axes).astype(dtype), x.var(axis=axes).astype(dtype)


def _kernel(gy, x, gamma, mean, var, eps: float = 1e-5) -> tuple:
    inv_std = OPS["rsqrt"].forward(np, var + eps)
    return batch_norm_grad.backward(gy, x, gamma, mean, inv_std)


@drawn_inputs
def test_the_kernel_matches_a_float64_reference(shape: tuple, dtype: type, seed: int) -> None:
    ins = _inputs(np.random.default_rng(seed), shape, dtype)
    got = _kernel(*ins)
    assert [g.dtype for g in got] == [np.dtype(dtype)] * 3
    scale = max(1.0, float(np.abs(ins[0]).sum(axis=0).max()))  # the sums' magnitude
    for g, want in zip(got, _reference(*ins, 1e-5)):
        np.testing.assert_allclose(g, want, rtol=TOL[dtype] * 10, atol=TOL[dtype] * scale)


def test_the_bits_do_not_depend_on_layout_or_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    ins = _inputs(np.random.default_rng(0), (4, 7, 9, 9), np.float32)
    with using_threads(1):
        one = _kernel(*ins)
    parts = []
    monkeypatch.setattr(crew_rows, "run", lambda *args: False)  # cpu_threads' split (crew: below)
    # the channel split is batch_norm's run_over_channels, shared with the forward
    monkeypatch.setattr(batch_norm, "split", lambda n, k: parts.append(k) or split(n, k))
    monkeypatch.setattr(batch_norm, "parts_for", lambda work, minimum: 2)
    with using_threads(2):
        two = _kernel(*ins)
    assert parts == [2]
    gy, x, *stats = ins
    last = [np.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2) for a in (gy, x)]
    strided = _kernel(*last, *stats)
    fortran = _kernel(np.asfortranarray(gy), np.asfortranarray(x), *stats)
    for other in (two, strided, fortran):
        assert all(np.array_equal(a, b) for a, b in zip(one, other))


def test_which_arrays_the_kernel_takes() -> None:
    x, c = np.ones((2, 3, 4), np.float32), np.ones(3, np.float32)
    assert host_kernels(np, "batch_norm_grad", x, x, c, c, c)
    assert not host_kernels(np, "batch_norm_grad", x[:, :, 0], x[:, :, 0], c, c, c)  # (N, C)
    assert not host_kernels(np, "batch_norm_grad", x, x, c.astype(np.float64), c, c)
    assert not host_kernels(np, "batch_norm_grad", x, x[:, :, :2], c, c, c)


def test_the_op_takes_the_kernel_and_other_inputs_the_array_calls() -> None:
    ins = _inputs(np.random.default_rng(3), (3, 4, 5), np.float32)
    got = [g.numpy() for g in ops.batch_norm_grad(*ins)]
    assert all(np.array_equal(a, b) for a, b in zip(got, _kernel(*ins)))
    rows = [a[:, :, 0].copy() if a.ndim == 3 else a for a in ins]  # (N, C): array calls
    for g, want in zip(ops.batch_norm_grad(*rows), _reference(*rows, 1e-5)):
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_train_step_runs_it_and_compiled_equals_eager(dtype: str, monkeypatch) -> None:
    calls: list[int] = []
    run = batch_norm_grad.backward
    monkeypatch.setattr(batch_norm_grad, "backward", lambda *a: calls.append(1) or run(*a))
    assert_compiled_equals_eager(dtype)
    assert len(calls) >= 6  # each step's backward, eager and compiled
