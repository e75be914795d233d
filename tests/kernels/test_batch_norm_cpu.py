"""The numba batch-norm forward kernel (kernels/norm/batch_norm.py): outputs, means and variances
against a float64 reference over drawn shapes (float32 and float64); the same bits whatever the
input's memory layout and on one or two threads; constant and NaN channels as numpy's form
gives them; and a conv/BN/ReLU train step compiled equal to eager, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from dualflow.background.process import using_threads
from dualflow.kernels.backend import host_kernels
from dualflow.kernels.base.cpu_threads import split
from dualflow.kernels.norm import batch_norm, crew_rows
from tests.kernels.conv_bn_step import assert_compiled_equals_eager, drawn_inputs

TOL = {np.float32: 2e-5, np.float64: 1e-12}


def _reference(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> tuple:
    """(y, mean, biased var) in float64."""
    x64, axes = x.astype(np.float64), (0, *range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean = x64.mean(axis=axes)
    var = np.square(x64 - mean.reshape(shape)).mean(axis=axes)
    scale = gamma.astype(np.float64) / np.sqrt(var + eps)
    y = (x64 - mean.reshape(shape)) * scale.reshape(shape) + beta.reshape(shape)
    return y, mean, var


def _inputs(rng: np.random.Generator, shape: tuple, dtype: type) -> tuple:
    x = (rng.standard_normal(shape) * 3 + rng.uniform(-5, 5)).astype(dtype)
    gamma, beta = (rng.standard_normal(shape[1]).astype(dtype) for _ in range(2))
    return x, gamma, beta


@drawn_inputs
def test_the_kernel_matches_a_float64_reference(shape: tuple, dtype: type, seed: int) -> None:
    x, gamma, beta = _inputs(np.random.default_rng(seed), shape, dtype)
    y, mean, var = batch_norm.forward(x, gamma, beta, 1e-5)
    assert (y.dtype, mean.dtype, var.dtype) == (np.dtype(dtype),) * 3
    assert y.shape == x.shape and mean.shape == var.shape == (shape[1],)
    for got, want in zip((y, mean, var), _reference(x, gamma, beta, 1e-5)):
        np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype] * 10)


def test_the_bits_do_not_depend_on_layout_or_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(0)
    x, gamma, beta = _inputs(rng, (4, 7, 9, 9), np.float32)
    with using_threads(1):
        one = batch_norm.forward(x, gamma, beta, 1e-5)
    parts = []
    monkeypatch.setattr(crew_rows, "run", lambda *args: False)  # cpu_threads' split (crew: below)
    monkeypatch.setattr(batch_norm, "split", lambda n, k: parts.append(k) or split(n, k))
    monkeypatch.setattr(batch_norm, "parts_for", lambda work, minimum: 2)  # whatever the size
    with using_threads(2):
        two = batch_norm.forward(x, gamma, beta, 1e-5)
    assert parts == [2]
    channels_last = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    strided = batch_norm.forward(channels_last, gamma, beta, 1e-5)
    fortran = batch_norm.forward(np.asfortranarray(x), gamma, beta, 1e-5)
    for other in (two, strided, fortran):
        assert all(np.array_equal(a, b) for a, b in zip(one, other))


def test_constant_and_nan_channels_as_numpys_form_gives_them() -> None:
    x = np.ones((4, 3, 2, 2), np.float32)
    x[:, 1] = np.arange(16, dtype=np.float32).reshape(4, 2, 2)
    x[2, 2, 1, 0] = np.nan
    gamma, beta = np.full(3, 2.0, np.float32), np.array([0.5, 0.0, 1.0], np.float32)
    y, mean, var = batch_norm.forward(x, gamma, beta, 1e-5)
    assert mean[0] == 1.0 and var[0] == 0.0 and np.all(y[:, 0] == 0.5)  # a constant channel
    assert np.isfinite(y[:, 1]).all() and np.isnan([mean[2], var[2]]).all()
    assert np.isnan(y[:, 2]).all()  # NaN anywhere in a channel: all of it, as numpy's mean


def test_which_arrays_the_kernel_takes() -> None:
    f32 = np.ones(3, np.float32)
    assert host_kernels(np, "batch_norm", np.ones((2, 3, 4), np.float32), f32, f32)
    assert not host_kernels(np, "batch_norm", np.ones((2, 3), np.float32), f32, f32)  # (N, C)
    mixed = f32.astype(np.float64)
    assert not host_kernels(np, "batch_norm", np.ones((2, 3, 4), np.float32), mixed, f32)
    assert not host_kernels(np, "batch_norm", np.ones((2, 3, 4), np.float16), f32, f32)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_conv_bn_relu_train_step_compiled_equals_eager(dtype: str) -> None:
    assert_compiled_equals_eager(dtype)
