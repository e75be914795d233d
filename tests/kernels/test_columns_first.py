"""The channels-first column kernels for few input channels
(kernels/conv/channels_first_columns.py): routing from conv_gemm, conv2d against a direct per-tap
sum over strides, pads, dilations and kernel shapes, the weight gradient through the adjoint
identity, and results independent of chunks and of the split over threads (compiled == eager:
test_conv_gemm's and test_winograd_cpu's steps start with such a layer)."""

from __future__ import annotations

import numpy as np
import pytest

from dualflow import nn
from dualflow.background.process import using_threads
from dualflow.kernels.conv import channels_first_columns, conv_gemm
from tests.kernels.sgd_steps import assert_compiled_equals_eager
from tests.kernels.test_conv_gemm import _direct

# (N, C, H, W, O, kh, kw, stride, pad, dilation)
GEOMETRIES = [
    (2, 3, 9, 8, 5, 3, 3, (1, 1), (1, 1), (1, 1)),
    (3, 1, 7, 7, 4, 1, 1, (1, 1), (0, 0), (1, 1)),
    (2, 4, 10, 9, 3, 3, 2, (2, 1), (2, 1), (1, 2)),
    (2, 2, 8, 11, 6, 5, 5, (3, 2), (2, 3), (1, 1)),
    (1, 3, 6, 6, 2, 2, 2, (1, 1), (0, 0), (2, 2)),
]


@pytest.mark.parametrize("geometry", GEOMETRIES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matches_direct_sum_and_weight_gradient_is_adjoint(geometry, dtype, monkeypatch):
    n, c, h, wd, o, kh, kw, stride, pad, dilation = geometry
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((n, c, h, wd)), rng.standard_normal((o, c, kh, kw))
    routed = []
    for name in ("conv2d", "conv2d_grad_weight"):
        kernel = getattr(channels_first_columns, name)
        spy = lambda *a, _k=kernel, _n=name: (routed.append(_n), _k(*a))[1]  # noqa: E731
        monkeypatch.setattr(channels_first_columns, name, spy)
    x32, w32 = x.astype(dtype), w.astype(dtype)
    y = conv_gemm.conv2d(np, x32, w32, stride, pad, dilation, 1)
    want = _direct(x, w, stride, pad, dilation, 1)
    tol = 1e-12 if dtype == "float64" else 1e-5
    np.testing.assert_allclose(y, want, rtol=0, atol=tol * np.abs(want).max())
    gy = rng.standard_normal(y.shape)
    gw = conv_gemm.conv2d_grad_weight(np, x, gy, (kh, kw), stride, pad, dilation, 1)
    assert routed == ["conv2d", "conv2d_grad_weight"]
    assert y.dtype == dtype and y.flags.c_contiguous and gw.shape == w.shape
    assert np.isclose(float(np.sum(w * gw)), float(np.sum(want * gy)), rtol=1e-11)


@pytest.mark.parametrize(("channels", "groups"), [(5, 1), (4, 2)])
def test_more_channels_or_groups_stay_on_im2col(channels: int, groups: int) -> None:
    x = np.zeros((1, channels, 6, 6), np.float32)
    w = np.zeros((4, channels // groups, 3, 3), np.float32)
    assert not channels_first_columns.runs(x, w, groups)
    assert channels_first_columns.runs(x[:, :4], np.zeros((4, 4, 3, 3), np.float32), 1)


def test_threads_change_nothing_and_runs_of_images_little(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 3, 12, 11)).astype(np.float32)
    w = rng.standard_normal((6, 3, 3, 3)).astype(np.float32)
    gy = rng.standard_normal((5, 6, 12, 11)).astype(np.float32)
    geometry = ((1, 1), (1, 1), (1, 1))

    def run():
        return (
            channels_first_columns.conv2d(x, w, geometry, (12, 11)),
            channels_first_columns.conv2d_grad_weight(x, gy, (3, 3), geometry),
        )

    monkeypatch.setattr(channels_first_columns, "COLUMN_BUDGET", 1)  # one image per run
    whole = run()
    with using_threads(1, blas_too=True):  # set_num_threads(1): every run on this thread
        for got, want in zip(run(), whole, strict=True):
            np.testing.assert_array_equal(got, want)
    monkeypatch.setattr(channels_first_columns, "COLUMN_BUDGET", 1 << 30)  # one run
    y, gw = run()
    np.testing.assert_array_equal(y, whole[0])  # each image's product is its own GEMM
    # Runs are chosen from shapes alone (eager and compiled calls run alike), but the weight
    # gradient adds the runs' sums in another grouping: close, not equal.
    np.testing.assert_allclose(gw, whole[1], rtol=1e-5, atol=1e-5 * np.abs(whole[1]).max())


def test_compiled_step_over_many_runs_is_bit_equal_to_eager(monkeypatch) -> None:
    # one image a run: five runs pulled by both cores, their weight sums added in run order
    monkeypatch.setattr(channels_first_columns, "COLUMN_BUDGET", 1)
    calls = []
    for name in ("conv2d", "conv2d_grad_weight"):
        kernel = getattr(channels_first_columns, name)
        spy = lambda *a, _k=kernel, _n=name: calls.append(_n) or _k(*a)  # noqa: E731
        monkeypatch.setattr(channels_first_columns, name, spy)

    def model() -> nn.Module:
        return nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()
        )

    assert_compiled_equals_eager(model, (5, 3, 12, 10), ("O0", "O2"))
    assert {"conv2d", "conv2d_grad_weight"} <= set(calls)
