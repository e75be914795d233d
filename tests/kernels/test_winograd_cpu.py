"""The Winograd F(4x4, 3x3) convolution kernels (kernels/conv/winograd.py): the shape rule that
routes conv_gemm to them, the loops' transforms against the Toom-Cook matrices of the chosen
points, conv2d against a direct per-tap sum (odd and rectangular outputs, pads 0-2), both
gradients through the adjoint identities, the float32 error, results independent of the thread
split and chunking, and compiled training steps bit-equal to eager."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualflow import nn
from dualflow.background.process import using_threads
from dualflow.kernels.conv import conv_gemm, winograd
from dualflow.kernels.conv.column_copies import PART_MIN_BYTES
from tests.kernels.sgd_steps import assert_compiled_equals_eager
from tests.kernels.test_conv_gemm import _direct

PLAIN = {"stride": (1, 1), "pad": (1, 1), "dilation": (1, 1), "groups": 1}


def _geometry(pad: int) -> dict:
    return {**PLAIN, "pad": (pad, pad)}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({}, True),
        ({"stride": (2, 2)}, False),
        ({"dilation": (2, 1)}, False),
        ({"groups": 2}, False),
        ({"ksize": (1, 1)}, False),
        ({"channels": (15, 64)}, False),
        ({"channels": (64, 15)}, False),
        ({"out_hw": (4, 4), "n": 16}, False),  # 16 tiles: the weight's transform costs more
        ({"out_hw": (8, 8), "n": 16}, True),  # 64 tiles
        ({"out_hw": (8, 7), "n": 16}, True),  # partial tiles count whole
        ({"out_hw": (8, 8), "n": 15}, False),
    ],
)
def test_shape_rule(change: dict, expected: bool) -> None:
    case = {"ksize": (3, 3), "channels": (32, 64), "out_hw": (32, 32), "n": 8, **change}
    geometry = {k: change.get(k, v) for k, v in PLAIN.items()}
    got = winograd.runs(geometry, case["ksize"], case["channels"], case["out_hw"], case["n"])
    assert got is expected


def _routed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the Winograd kernels conv_gemm calls from now on."""
    calls: list[str] = []
    for name in ("conv2d", "conv2d_grad_weight", "conv_transpose2d"):
        kernel = getattr(winograd, name)

        def spy(*args, _kernel=kernel, _name=name):
            calls.append(_name)
            return _kernel(*args)

        monkeypatch.setattr(winograd, name, spy)
    return calls


def test_loops_apply_the_toom_cook_matrices() -> None:
    # the loops write B^T, A^T and A out by hand: on unit tiles they must give the matrices of
    # winograd.POINTS (kron: row 6i + j of a 2-D transform is entry (i, j) of the tile)
    a_t, _, b_t = (np.array(m, dtype=np.float64) for m in winograd._toom_cook(winograd.POINTS))
    unit = np.eye(36).reshape(36, 1, 6, 6)  # image p: a 6x6 tile with a one at position p
    v = winograd._input_tiles(unit, (1, 1), (0, 0))  # (36, 36 tiles, 1)
    np.testing.assert_array_equal(v[:, :, 0], np.kron(b_t, b_t))
    y = np.empty((36, 1, 4, 4))
    winograd._in_parts("_output_tiles", y, (np.eye(36)[:, :, None], 1, 1), 36)
    np.testing.assert_array_equal(y.reshape(36, 16).T, np.kron(a_t, a_t))
    g = np.empty((36, 16, 1))
    winograd._in_parts("_gradient_tiles", g, (np.eye(16).reshape(16, 1, 4, 4), 1, 1), 16)
    np.testing.assert_array_equal(g[:, :, 0], np.kron(a_t.T, a_t.T))


# (N, C, H, W, O, pad): odd and rectangular outputs (partial tiles), pads 0-2, C != O
SHAPES = [(2, 16, 31, 33, 17, 1), (1, 20, 34, 36, 16, 0), (3, 16, 19, 21, 18, 2)]


@pytest.mark.parametrize("shape", SHAPES)
def test_matches_direct_sum_and_gradients_are_adjoints(shape, monkeypatch) -> None:
    n, c, h, wd, o, pad = shape
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((n, c, h, wd)), rng.standard_normal((o, c, 3, 3))
    calls, geometry = _routed(monkeypatch), _geometry(pad)
    y = conv_gemm.conv2d(np, x, w, (1, 1), (pad, pad), (1, 1), 1)
    want = _direct(x, w, (1, 1), (pad, pad), (1, 1), 1)
    np.testing.assert_allclose(y, want, rtol=0, atol=1e-12 * np.abs(want).max())
    gy = rng.standard_normal(y.shape)
    gx = conv_gemm.conv_transpose2d(np, gy, w, geometry, (h, wd))
    gw = conv_gemm.conv2d_grad_weight(np, x, gy, (3, 3), (1, 1), (pad, pad), (1, 1), 1)
    assert set(calls) == {"conv2d", "conv_transpose2d", "conv2d_grad_weight"}
    assert gx.shape == x.shape and gw.shape == w.shape
    assert gx.flags.c_contiguous and gw.flags.c_contiguous and y.flags.c_contiguous
    inner = float(np.sum(want * gy))  # <conv(x, w), gy> = <x, conv^T(gy)> = <w, grad_w(x, gy)>
    assert np.isclose(float(np.sum(x * gx)), inner, rtol=1e-11)
    assert np.isclose(float(np.sum(w * gw)), inner, rtol=1e-11)


def test_float32_error_is_bounded() -> None:
    # max |error| / max |y| against float64, weights scaled 1/sqrt(9C) (design notes "Winograd
    # F(4x4, 3x3)": 2.0e-6 to 4.6e-6 at 64-256 channels; F(2x2, 3x3) and im2col + GEMM 4e-7 to
    # 9e-7; Lavin & Gray's points 0, +-1, +-2 1.4e-5 at 256 channels)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 64, 16, 16))
    w = rng.standard_normal((64, 64, 3, 3)) / np.sqrt(9 * 64)
    gy = rng.standard_normal((4, 64, 16, 16))
    pairs = [
        (winograd.conv2d(x.astype(np.float32), w.astype(np.float32), (1, 1)),
         winograd.conv2d(x, w, (1, 1))),
        (winograd.conv2d_grad_weight(x.astype(np.float32), gy.astype(np.float32), (1, 1)),
         winograd.conv2d_grad_weight(x, gy, (1, 1))),
        (winograd.conv_transpose2d(gy.astype(np.float32), w.astype(np.float32), (1, 1)),
         winograd.conv_transpose2d(gy, w, (1, 1))),
    ]  # fmt: skip
    for got, want in pairs:
        assert got.dtype == np.float32
        assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


def _all(x, w, gy, pad):
    return (
        winograd.conv2d(x, w, (pad, pad)),
        winograd.conv_transpose2d(gy, w, (pad, pad)),
        winograd.conv2d_grad_weight(x, gy, (pad, pad)),
    )


@settings(max_examples=6, deadline=None)
@given(
    n=st.integers(2, 5),
    side=st.integers(5, 14),
    channels=st.sampled_from([(16, 16), (16, 24), (24, 16)]),
    pad=st.integers(0, 2),
)
def test_results_do_not_depend_on_threads_or_chunks(n, side, channels, pad) -> None:
    rng = np.random.default_rng(side)
    x = rng.standard_normal((n, channels[0], side, side + 1)).astype(np.float32)
    w = rng.standard_normal((channels[1], channels[0], 3, 3)).astype(np.float32)
    gy = rng.standard_normal((n, channels[1], side + 2 * pad - 2, side + 2 * pad - 1))
    gy = gy.astype(np.float32)
    saved = (winograd.MIN_CHUNK_BYTES, winograd.CHUNK_BYTES)
    try:
        winograd.PART_MIN_BYTES = 1  # every loop runs as two parts (n >= 2 images)
        with using_threads(2):
            base = _all(x, w, gy, pad)
        with using_threads(1):  # one part per loop
            for got, want in zip(_all(x, w, gy, pad), base, strict=True):
                np.testing.assert_array_equal(got, want)
        winograd.MIN_CHUNK_BYTES = winograd.CHUNK_BYTES = 1  # one image per chunk
        with using_threads(2):  # chunks two at a time, one a core; sums added in chunk order
            y, gx, gw = _all(x, w, gy, pad)
        with using_threads(1):
            for got, want in zip(_all(x, w, gy, pad), (y, gx, gw), strict=True):
                np.testing.assert_array_equal(got, want)
    finally:
        winograd.MIN_CHUNK_BYTES, winograd.CHUNK_BYTES = saved
        winograd.PART_MIN_BYTES = PART_MIN_BYTES
    # other chunks are other GEMM shapes, which OpenBLAS may run with another kernel (its
    # small-matrix one for a few tiles) and the weight gradient adds per-chunk sums: the same up
    # to rounding (the chunks follow from shapes alone, so eager and compiled calls share them)
    for got, want in zip((y, gx, gw), base, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def _winograd_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),  # 3 input channels: im2col
        nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1),  # Winograd: forward, both gradients
        nn.ReLU(),
        nn.Conv2d(16, 24, 3, padding=2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
    )


def test_compiled_winograd_steps_are_bit_equal_to_eager(monkeypatch) -> None:
    calls = _routed(monkeypatch)
    assert_compiled_equals_eager(_winograd_model, (2, 3, 32, 30), ("O0", "O2"))
    assert {"conv2d", "conv_transpose2d", "conv2d_grad_weight"} <= set(calls)


def test_large_and_unequal_padding(monkeypatch) -> None:
    # the forward and weight gradient take any padding (pads above 2 leave the input gradient
    # to im2col: the flipped map would need a negative one)
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((2, 16, 30, 31)), rng.standard_normal((16, 16, 3, 3))
    calls, pad = _routed(monkeypatch), (3, 1)
    y = conv_gemm.conv2d(np, x, w, (1, 1), pad, (1, 1), 1)
    want = _direct(x, w, (1, 1), pad, (1, 1), 1)
    np.testing.assert_allclose(y, want, rtol=0, atol=1e-12 * np.abs(want).max())
    gy = rng.standard_normal(y.shape)
    gw = conv_gemm.conv2d_grad_weight(np, x, gy, (3, 3), (1, 1), pad, (1, 1), 1)
    gx = conv_gemm.conv_transpose2d(np, gy, w, {**PLAIN, "pad": pad}, x.shape[2:])
    assert calls == ["conv2d", "conv2d_grad_weight"]  # gx: im2col (pad 3)
    inner = float(np.sum(want * gy))
    assert np.isclose(float(np.sum(w * gw)), inner, rtol=1e-11)
    assert np.isclose(float(np.sum(x * gx)), inner, rtol=1e-11)
