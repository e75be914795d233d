"""The few-pixels convolution route (kernels/conv/valid_taps.py): its shape rule, its results
against a direct sum over taps (forward) and the adjoint identity (input gradient), through
conv_gemm's routing, and compiled training steps bit-equal to eager."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualflow import nn
from dualflow.background.process import using_threads
from dualflow.kernels.conv import conv_gemm, conv_scratch, valid_taps
from tests.kernels.sgd_steps import assert_compiled_equals_eager

PLAIN = {"stride": (1, 1), "dilation": (1, 1), "groups": 1}


def _direct(x, w, pad):
    """Cross-correlation, stride 1, as a float64 sum over taps of channel contractions."""
    kh, kw = w.shape[2:]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad[0],) * 2, (pad[1],) * 2))
    ho, wo = xp.shape[2] - kh + 1, xp.shape[3] - kw + 1
    parts = (
        np.einsum("nchw,oc->nohw", xp[:, :, a : a + ho, b : b + wo], w[:, :, a, b])
        for a in range(kh)
        for b in range(kw)
    )
    return sum(parts)


def test_shape_rule() -> None:
    g = {**PLAIN, "pad": (1, 1)}
    assert valid_taps.takes(g, (3, 3), (512, 512), (4, 4), (4, 4))  # 69% of the taps valid
    assert not valid_taps.takes(g, (3, 3), (512, 512), (16, 16), (16, 16))  # 88%
    assert not valid_taps.takes(g, (3, 3), (8, 512), (4, 4), (4, 4))  # K = 8: too thin
    assert not valid_taps.takes({**g, "stride": (2, 2)}, (3, 3), (64, 64), (4, 4), (2, 2))
    assert not valid_taps.takes({**g, "groups": 2}, (3, 3), (64, 64), (4, 4), (4, 4))
    assert valid_taps.valid_share((4, 4), (4, 4), (3, 3), (1, 1)) == pytest.approx(100 / 144)
    assert valid_taps.valid_share((8, 8), (8, 8), (1, 1), (0, 0)) == 1.0


@settings(max_examples=8, deadline=None)
@given(
    n=st.integers(1, 3),
    hw=st.tuples(st.integers(2, 5), st.integers(2, 5)),
    k=st.sampled_from([(3, 3), (5, 5), (3, 1), (2, 3)]),
    pad=st.tuples(st.integers(0, 2), st.integers(0, 2)),
    channels=st.sampled_from([(16, 16), (16, 24), (20, 16)]),
)
def test_matches_direct_sum_and_the_input_gradient_is_the_adjoint(n, hw, k, pad, channels):
    rng = np.random.default_rng(sum(hw) + 7 * n)
    c, o = channels
    x = rng.standard_normal((n, c, *hw))
    w = rng.standard_normal((o, c, *k))
    out_hw = (hw[0] + 2 * pad[0] - k[0] + 1, hw[1] + 2 * pad[1] - k[1] + 1)
    if min(out_hw) < 1:
        return
    y = valid_taps.conv2d(x, w, pad)
    want = _direct(x, w, pad)
    np.testing.assert_allclose(y, want, rtol=0, atol=1e-12 * np.abs(want).max())
    gy = rng.standard_normal(y.shape)
    gx = valid_taps.conv_transpose2d(gy, w, pad, hw)
    assert gx.shape == x.shape and gx.flags.c_contiguous and y.flags.c_contiguous
    assert np.isclose(np.sum(gx * x), np.sum(y * gy), rtol=1e-11, atol=1e-9)


def test_conv_gemm_routes_both_directions_here(monkeypatch) -> None:
    calls = []
    for name in ("conv2d", "conv_transpose2d"):
        real = getattr(valid_taps, name)
        monkeypatch.setattr(valid_taps, name, lambda *a, f=real, k=name: calls.append(k) or f(*a))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 32, 4, 4)).astype(np.float32)
    w = rng.standard_normal((48, 32, 3, 3)).astype(np.float32)
    y = conv_gemm.conv2d(np, x, w, (1, 1), (1, 1), (1, 1), 1)
    gy = rng.standard_normal(y.shape).astype(np.float32)
    gx = conv_gemm.conv_transpose2d(np, gy, w, {**PLAIN, "pad": (1, 1)}, (4, 4))
    assert calls == ["conv2d", "conv_transpose2d"]
    want = _direct(x, w, (1, 1))
    np.testing.assert_allclose(y, want, rtol=0, atol=1e-5 * np.abs(want).max())
    monkeypatch.setattr(valid_taps, "MAX_VALID", 0.0)  # im2col's route, for the input gradient
    im2col = conv_gemm.conv_transpose2d(np, gy, w, {**PLAIN, "pad": (1, 1)}, (4, 4))
    np.testing.assert_allclose(gx, im2col, rtol=0, atol=1e-5 * np.abs(im2col).max())


def test_scratch_fact_bounds_what_the_kernels_allocate() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 32, 4, 4)).astype(np.float32)
    w = rng.standard_normal((64, 32, 3, 3)).astype(np.float32)
    gy = rng.standard_normal((4, 64, 4, 4)).astype(np.float32)
    attrs = {**PLAIN, "pad": (1, 1), "output_padding": (0, 0)}
    calls = (
        lambda: valid_taps.conv2d(x, w, (1, 1)),
        lambda: valid_taps.conv_transpose2d(gy, w, (1, 1), (4, 4)),
    )
    facts = (
        conv_scratch.conv2d_scratch(x.shape, w.shape, 4, attrs),
        conv_scratch.conv_transpose2d_scratch(gy.shape, w.shape, 4, attrs),
    )
    for call, fact in zip(calls, facts, strict=True):
        call()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            result = call()
            peak = tracemalloc.get_traced_memory()[1] - before - result.nbytes
        finally:
            tracemalloc.stop()
        # the largest tap's pixels may be a view (no copy): the fact is an upper bound
        assert 0.75 * fact - 8192 <= peak <= 1.1 * fact + 8192, (peak, fact)


def _model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1),  # 8x8 -> 4x4
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1),  # 4x4: this route, forward and input gradient
        nn.ReLU(),
        nn.Conv2d(32, 16, 3, padding=1),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
    )


def test_compiled_steps_are_bit_equal_to_eager(monkeypatch) -> None:
    calls = []
    for name in ("conv2d", "conv_transpose2d"):
        real = getattr(valid_taps, name)
        monkeypatch.setattr(valid_taps, name, lambda *a, f=real, k=name: calls.append(k) or f(*a))
    assert_compiled_equals_eager(_model, (2, 3, 8, 8), ("O0", "O2"))
    assert {"conv2d", "conv_transpose2d"} <= set(calls)


def test_results_do_not_depend_on_threads() -> None:
    # the taps' GEMMs run two at a time on one OpenBLAS thread each, or one after another on
    # OpenBLAS's threads: the same calls, added in tap order
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 128, 4, 4)).astype(np.float32)
    w = rng.standard_normal((96, 128, 3, 3)).astype(np.float32)
    gy = rng.standard_normal((8, 96, 4, 4)).astype(np.float32)
    results = []
    for count in (2, 1):
        with using_threads(count):
            y = valid_taps.conv2d(x, w, (1, 1))
            results.append((y, valid_taps.conv_transpose2d(gy, w, (1, 1), (4, 4))))
    for got, want in zip(*results, strict=True):
        np.testing.assert_array_equal(got, want)
