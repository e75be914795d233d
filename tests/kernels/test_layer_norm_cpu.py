"""The numba layer-norm kernels (kernels/norm/layer_norm.py, layer_norm_grad.py): forward and
backward against a float64 reference over drawn shapes (float32 and float64), the forward's
bits against its stated roundings, the same bits whatever the inputs' layout, the thread count
or the row blocks' split, which arrays they take, and a Transformer encoder training step that
runs them, compiled equal to eager, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dualflow
from dualflow import nn, ops
from dualflow.background.process import using_threads
from dualflow.kernels.backend import host_kernels
from dualflow.kernels.base import native_crew
from dualflow.kernels.base.cpu_threads import split
from dualflow.kernels.norm import batch_norm, crew_rows, layer_norm, layer_norm_grad
from dualflow.kernels.numba import native_split
from dualflow.ops import OPS
from dualflow.ops.dispatch import apply

EPS = 1e-5
TOL = {np.float32: 5e-5, np.float64: 1e-11}


def _inputs(rng: np.random.Generator, shape: tuple, k: int, dtype: type) -> tuple:
    x = (rng.standard_normal(shape) * 3 + rng.uniform(-5, 5)).astype(dtype)
    params = shape[len(shape) - k :]
    return x, rng.uniform(0.5, 1.5, params).astype(dtype), rng.standard_normal(params).astype(dtype)


def _statistics(x: np.ndarray, k: int) -> tuple:
    axes = tuple(range(x.ndim - k, x.ndim))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    return mean, 1.0 / np.sqrt(((x64 - mean) ** 2).mean(axis=axes, keepdims=True) + EPS)


def _grad_reference(gy, x, gamma, mean, rstd) -> tuple:
    """(gx, ggamma, gbeta) in float64 from the kernel's own statistics."""
    axes = tuple(range(x.ndim - gamma.ndim, x.ndim))
    rows = tuple(range(x.ndim - gamma.ndim))
    gy64, s = gy.astype(np.float64), rstd.astype(np.float64)
    xhat = (x.astype(np.float64) - mean) * s
    g = gy64 * gamma
    a, b = g.mean(axis=axes, keepdims=True), (g * xhat).mean(axis=axes, keepdims=True)
    return s * (g - a - xhat * b), (gy64 * xhat).sum(axis=rows), gy64.sum(axis=rows)


SHAPES = st.tuples(
    st.lists(st.integers(0, 9), min_size=0, max_size=3),
    st.lists(st.integers(1, 40), min_size=1, max_size=2),
)


@settings(max_examples=40, deadline=None)  # the first example compiles the kernels
@given(drawn=SHAPES, dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**16))
def test_the_kernels_match_a_float64_reference(drawn: tuple, dtype: type, seed: int) -> None:
    lead, row = drawn
    rng = np.random.default_rng(seed)
    x, gamma, beta = _inputs(rng, (*lead, *row), len(row), dtype)
    y, mean, rstd = layer_norm.forward(x, gamma, beta, EPS)
    want_mean, want_rstd = _statistics(x, len(row))
    assert y.dtype == mean.dtype == rstd.dtype == np.dtype(dtype)
    assert mean.shape == rstd.shape == (*lead, *(1,) * len(row))
    tol = TOL[dtype] * 10
    np.testing.assert_allclose(mean, want_mean, rtol=tol, atol=tol * 10)
    np.testing.assert_allclose(rstd, want_rstd, rtol=tol)
    want = (x - want_mean) * want_rstd * gamma + beta
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol * 10)
    gy = rng.standard_normal(x.shape).astype(dtype)
    got = layer_norm_grad.backward(gy, x, gamma, mean, rstd)
    scale = max(1.0, float(np.abs(gy).sum(axis=tuple(range(len(lead)))).max(initial=0.0)))
    for g, want_g in zip(got, _grad_reference(gy, x, gamma, mean, rstd)):
        assert g.dtype == np.dtype(dtype) and g.shape == want_g.shape
        np.testing.assert_allclose(g, want_g, rtol=tol, atol=TOL[dtype] * scale)


def test_the_forward_bits_are_its_stated_roundings() -> None:
    x, gamma, beta = _inputs(np.random.default_rng(0), (64, 256), 1, np.float32)
    y, mean, rstd = layer_norm.forward(x, gamma, beta, EPS)
    # each row's float64 sum rounded once; deviations rounded in float32, squared in float64
    want_mean = (x.astype(np.float64).sum(axis=1, keepdims=True) / 256).astype(np.float32)
    deviations = (x - want_mean).astype(np.float64)
    var = ((deviations * deviations).sum(axis=1, keepdims=True) / 256).astype(np.float32)
    want_rstd = np.float32(1.0) / np.sqrt(var + np.float32(EPS))
    assert np.array_equal(mean, want_mean) and np.array_equal(rstd, want_rstd)
    assert np.array_equal(y, ((x - want_mean) * want_rstd) * gamma + beta)


def _both(x, gamma, beta, gy) -> list:
    y, mean, rstd = layer_norm.forward(x, gamma, beta, EPS)
    return [y, mean, rstd, *layer_norm_grad.backward(gy, x, gamma, mean, rstd)]


def test_the_bits_do_not_depend_on_layout_threads_or_blocks(monkeypatch) -> None:
    rng = np.random.default_rng(1)
    x, gamma, beta = _inputs(rng, (300, 48), 1, np.float32)
    gy = rng.standard_normal(x.shape).astype(np.float32)
    with using_threads(1):
        one = _both(x, gamma, beta, gy)
    parts: list[int] = []
    # the row and block splits are batch_norm's run_over_channels (the crew's is below)
    monkeypatch.setattr(crew_rows, "run", lambda *args: False)
    monkeypatch.setattr(batch_norm, "split", lambda n, k: parts.append(k) or split(n, k))
    monkeypatch.setattr(batch_norm, "parts_for", lambda work, minimum: 3)
    with using_threads(2):
        split_runs = _both(x, gamma, beta, gy)
    assert parts == [3, 3]  # the forward's rows and the backward's blocks, each in three parts
    fortran = _both(np.asfortranarray(x), gamma, beta, np.asfortranarray(gy))
    for other in (split_runs, fortran):
        assert all(np.array_equal(a, b) for a, b in zip(one, other))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_crews_split_has_the_same_bits_as_one_thread(monkeypatch, dtype) -> None:
    crew = native_crew.crew()
    if crew is None:
        pytest.skip("no native crew on this platform")
    rng = np.random.default_rng(2)
    x, gamma, beta = _inputs(rng, (301, 40), 1, dtype)  # 301 rows: 19 blocks, the last short
    gy = rng.standard_normal(x.shape).astype(dtype)
    monkeypatch.setattr(crew_rows, "run", lambda *args: False)
    alone = _both(x, gamma, beta, gy)
    runs: list[bool] = []
    monkeypatch.undo()
    monkeypatch.setattr(native_split, "splits", lambda *args: crew)  # every call splits
    real = crew_rows.crew_ranges.run
    monkeypatch.setattr(crew_rows.crew_ranges, "run", lambda *a: runs.append(real(*a)) or runs[-1])
    split_runs = _both(x, gamma, beta, gy)
    assert runs == [True, True]  # the forward's rows and the backward's blocks on the crew
    assert all(np.array_equal(a, b) for a, b in zip(alone, split_runs))


def test_row_blocks_follow_the_row_count_only() -> None:
    assert layer_norm_grad.block_rows(1) == layer_norm_grad.MIN_BLOCK_ROWS
    for rows in (100, 1024, 10_000, 123_457):
        block = layer_norm_grad.block_rows(rows)
        assert -(-rows // block) <= layer_norm_grad.MAX_BLOCKS and block >= 16


def test_which_arrays_the_kernels_take() -> None:
    x, g = np.ones((2, 3, 4), np.float32), np.ones(4, np.float32)
    stats = np.ones((2, 3, 1), np.float32)
    assert host_kernels(np, "layer_norm", x, g, g)
    assert host_kernels(
        np, "layer_norm", x, np.ones((3, 4), np.float32), np.ones((3, 4), np.float32)
    )
    assert not host_kernels(np, "layer_norm", x, g.astype(np.float64), g)  # mixed dtypes
    assert not host_kernels(np, "layer_norm", x.astype(np.float16), g.astype(np.float16), g)
    assert not host_kernels(np, "layer_norm", x, np.ones(3, np.float32), np.ones(3, np.float32))
    assert host_kernels(np, "layer_norm_grad", x, x, g, stats, stats)
    assert not host_kernels(np, "layer_norm_grad", x, x, g, stats[:1], stats)
    assert not host_kernels(np, "layer_norm_grad", x, x[:1], g, stats, stats)


def test_other_inputs_take_the_array_calls_with_the_same_meaning() -> None:
    x, gamma, beta = _inputs(np.random.default_rng(3), (5, 6), 1, np.float32)
    mixed = gamma.astype(np.float64)  # no kernel: numpy's calls, the result in float64
    y, mean, rstd = (t.numpy() for t in apply(OPS["layer_norm"], x, mixed, beta, eps=EPS))
    want_mean, want_rstd = _statistics(x, 1)
    assert y.dtype == np.float64 and mean.dtype == rstd.dtype == np.float32
    np.testing.assert_allclose(y, (x - want_mean) * want_rstd * mixed + beta, rtol=1e-5, atol=1e-5)
    half = [a.astype(np.float16) for a in (x, gamma, beta)]
    got = ops.layer_norm(*half).numpy()
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, (x - want_mean) * want_rstd * gamma + beta, atol=2e-2)


def _transformer_step(dtype: str) -> tuple:
    dualflow.random.seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True).to(dtype)
    opt = dualflow.optim.Adam(layer.parameters(), lr=1e-2)
    x = dualflow.tensor(np.random.default_rng(1).standard_normal((3, 5, 16)), dtype=dtype)

    def step() -> object:
        opt.zero_grad()
        loss = (layer(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    return layer, step


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_transformer_step_runs_them_and_compiled_equals_eager(dtype: str, monkeypatch) -> None:
    calls: list[str] = []
    forward, backward = layer_norm.forward, layer_norm_grad.backward
    monkeypatch.setattr(layer_norm, "forward", lambda *a: calls.append("f") or forward(*a))
    monkeypatch.setattr(layer_norm_grad, "backward", lambda *a: calls.append("b") or backward(*a))
    eager_layer, eager_step = _transformer_step(dtype)
    compiled_layer, compiled_step = _transformer_step(dtype)
    compiled_step = dualflow.compile(compiled_step)
    for _ in range(3):
        assert eager_step().item() == compiled_step().item()
    for a, b in zip(eager_layer.state_dict().values(), compiled_layer.state_dict().values()):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    assert calls.count("f") >= 2 * 2 * 3 and calls.count("b") >= 2 * 2 * 3  # 2 norms, 2 modes


def test_the_backward_declares_its_partial_sums_as_scratch() -> None:
    # what the memory plan counts: the kernel's two float64 (blocks, D) arrays of partial sums
    allocated: list[int] = []
    empty = np.empty

    def counting(shape, *args, **kwargs):
        array = empty(shape, *args, **kwargs)
        if array.dtype == np.float64 and array.ndim == 2:
            allocated.append(array.nbytes)
        return array

    for shape, k in (((16, 64, 256), 1), ((3, 5, 7), 2), ((10_000, 8), 1)):
        x, gamma, _ = _inputs(np.random.default_rng(0), shape, k, np.float32)
        stats = np.ones((*shape[: len(shape) - k], *(1,) * k), np.float32)
        metas = [(a.shape, a.dtype) for a in (x, x, gamma, stats, stats)]
        allocated.clear()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(layer_norm_grad.np, "empty", counting)
            layer_norm_grad.backward(x, x, gamma, stats, stats)
        assert OPS["layer_norm_grad"].scratch(tuple(metas), {}) == sum(allocated) > 0
