"""The channels-last GEMM convolution kernels (kernels/conv/conv_gemm.py): conv2d against a direct
per-tap sum, its input and weight gradients through the adjoint identities, the chunked columns
(bounded scratch) against one chunk, a compiled (O0) conv training step bit-equal to eager, and
results independent of the inputs' strides."""

from __future__ import annotations

import numpy as np
import pytest

from dualflow import nn
from dualflow.kernels.conv import conv_gemm, layout_copies, valid_taps
from tests.kernels.sgd_steps import assert_compiled_equals_eager

# (N, C, H, W, O, kh, kw, stride, pad, dilation, groups)
GEOMETRIES = [
    (2, 3, 7, 6, 4, 3, 3, (1, 1), (1, 1), (1, 1), 1),
    (2, 4, 8, 8, 6, 3, 3, (2, 2), (1, 1), (1, 1), 2),
    (3, 4, 8, 7, 6, 1, 1, (2, 2), (0, 0), (1, 1), 1),
    (2, 6, 9, 9, 6, 3, 2, (1, 2), (2, 1), (2, 1), 3),
    (2, 4, 7, 8, 8, 2, 2, (3, 1), (1, 0), (1, 1), 4),
    (1, 2, 5, 5, 2, 1, 1, (1, 1), (0, 0), (1, 1), 1),
    (2, 64, 4, 4, 128, 3, 3, (1, 1), (1, 1), (1, 1), 1),  # weight >= ROWS_FIRST_MIN elements
    (2, 64, 8, 7, 128, 3, 3, (2, 2), (1, 1), (1, 1), 1),
]


def _direct(x, w, stride, pad, dilation, groups):
    """conv2d as a sum over taps of per-group channel contractions (no im2col, no GEMM)."""
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, pad, dilation
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    y = np.zeros((n, o, ho, wo))
    og = o // groups
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                win = xp[:, g * cg : (g + 1) * cg, i * dh :, j * dw :]
                win = win[:, :, : sh * (ho - 1) + 1 : sh, : sw * (wo - 1) + 1 : sw]
                y[:, g * og : (g + 1) * og] += np.einsum(
                    "nchw,oc->nohw", win, w[g * og :, :, i, j][:og]
                )
    return y


def _case(geometry, seed=0):
    n, c, h, wd, o, kh, kw, stride, pad, dilation, groups = geometry
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, wd))
    w = rng.standard_normal((o, c // groups, kh, kw))
    return x, w, (stride, pad, dilation, groups)


@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_conv2d_matches_direct_sum_and_gradients_are_adjoints(geometry):
    x, w, (stride, pad, dilation, groups) = _case(geometry)
    y = conv_gemm.conv2d(np, x, w, stride, pad, dilation, groups)
    np.testing.assert_allclose(y, _direct(x, w, stride, pad, dilation, groups), atol=1e-12)
    gy = np.random.default_rng(1).standard_normal(y.shape)
    attrs = {"stride": stride, "pad": pad, "dilation": dilation, "groups": groups}
    gx = conv_gemm.conv_transpose2d(np, gy, w, attrs, x.shape[2:])
    gw = conv_gemm.conv2d_grad_weight(np, x, gy, w.shape[2:], stride, pad, dilation, groups)
    assert gx.shape == x.shape and gw.shape == w.shape
    assert gx.flags.c_contiguous and gw.flags.c_contiguous and y.flags.c_contiguous
    inner = float(np.sum(y * gy))  # <conv(x, w), gy> = <x, conv^T(gy)> = <w, grad_w(x, gy)>
    assert np.isclose(float(np.sum(x * gx)), inner, rtol=1e-12, atol=1e-10)
    assert np.isclose(float(np.sum(w * gw)), inner, rtol=1e-12, atol=1e-10)


@pytest.mark.parametrize("geometry", GEOMETRIES[:4] + GEOMETRIES[-2:])  # -2: the rows routes
def test_chunked_columns_agree_with_one_chunk(geometry, monkeypatch):
    x, w, (stride, pad, dilation, groups) = _case(geometry, seed=2)
    attrs = {"stride": stride, "pad": pad, "dilation": dilation, "groups": groups}

    def run():
        y = conv_gemm.conv2d(np, x, w, stride, pad, dilation, groups)
        gx = conv_gemm.conv_transpose2d(np, y, w, attrs, x.shape[2:])
        gw = conv_gemm.conv2d_grad_weight(np, x, y, w.shape[2:], stride, pad, dilation, groups)
        return y, gx, gw

    whole = run()
    monkeypatch.setattr(conv_gemm, "COLUMN_BUDGET", 1)  # one image per chunk
    assert conv_gemm.images_per_chunk(x.shape[0], 100) == 1
    for got, want in zip(run(), whole):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("geometry", GEOMETRIES[-2:])
def test_large_filters_over_few_pixels_read_the_weight_as_rows(geometry, monkeypatch):
    # more filters than output pixels: the forward's GEMM reads (O, taps*C) rows (no taps-first
    # transpose of the weight); a large weight's gradient comes as rows reordered within each
    # filter: the same sums up to rounding, in the filters' layout
    x, w, (stride, pad, dilation, groups) = _case(geometry, seed=3)
    monkeypatch.setattr(valid_taps, "MAX_VALID", 0.0)  # 4x4 stride 1 would run its taps' GEMMs
    forwards = []
    real_rows = conv_gemm._conv2d_rows
    monkeypatch.setattr(conv_gemm, "_conv2d_rows", lambda *a: forwards.append(1) or real_rows(*a))
    y = conv_gemm.conv2d(np, x, w, stride, pad, dilation, groups)
    assert forwards == [1] and y.flags.c_contiguous
    np.testing.assert_allclose(y, _direct(x, w, stride, pad, dilation, groups), atol=1e-12)
    gy = np.random.default_rng(4).standard_normal(y.shape)
    reorders = []
    real = layout_copies.rows_to_filters
    monkeypatch.setattr(layout_copies, "rows_to_filters", lambda *a: reorders.append(1) or real(*a))
    rows = conv_gemm.conv2d_grad_weight(np, x, gy, w.shape[2:], stride, pad, dilation, groups)
    assert reorders == [1]
    monkeypatch.setattr(conv_gemm, "ROWS_FIRST_MIN", w.size + 1)
    taps = conv_gemm.conv2d_grad_weight(np, x, gy, w.shape[2:], stride, pad, dilation, groups)
    assert reorders == [1] and rows.flags.c_contiguous
    np.testing.assert_allclose(rows, taps, rtol=1e-12, atol=1e-12 * np.abs(taps).max())


def test_compiled_conv_step_is_bit_equal_to_eager_at_O0():
    """Strided, grouped, 1x1 and 3x3 convs, forward and both gradients, in one training step."""

    def model():
        return nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2),
            nn.ReLU(),
            nn.Conv2d(8, 4, 1),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )

    assert_compiled_equals_eager(model, (4, 3, 9, 9), ("O0",))


@pytest.mark.parametrize("channels", [3, 16])  # channels-first columns; Winograd
def test_results_do_not_depend_on_the_inputs_strides(channels: int) -> None:
    # a compiled plan may hand a kernel a C-ordered buffer where eager had a view: same bits
    rng = np.random.default_rng(channels)
    x = rng.standard_normal((2, channels, 34, 33)).astype(np.float32)
    view = np.ascontiguousarray(x.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)
    assert not view.flags.c_contiguous
    w = rng.standard_normal((16, channels, 3, 3)).astype(np.float32)
    y = conv_gemm.conv2d(np, x, w, (1, 1), (1, 1), (1, 1), 1)
    np.testing.assert_array_equal(conv_gemm.conv2d(np, view, w, (1, 1), (1, 1), (1, 1), 1), y)
    gy = rng.standard_normal(y.shape).astype(np.float32)
    gy_view = np.ascontiguousarray(gy.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)
    args = ((3, 3), (1, 1), (1, 1), (1, 1), 1)
    gw = conv_gemm.conv2d_grad_weight(np, x, gy, *args)
    np.testing.assert_array_equal(conv_gemm.conv2d_grad_weight(np, view, gy_view, *args), gw)
