"""Pointwise (1x1) convolutions as batched GEMMs (kernels/conv/pointwise_conv.py): routing from
conv_gemm, conv2d against a direct sum over strides, the input gradient (with output padding)
and the weight gradient through the adjoint identities, a compiled step equal to eager, and the
scratch facts against the measured peak of a compiled training step."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import nn
from dualflow.kernels.conv import conv_gemm, pointwise_conv
from tests.kernels.sgd_steps import assert_compiled_equals_eager
from tests.kernels.test_conv_gemm import _direct
from tests.tracer.test_memory_plan import _measured

# (N, C, H, W, O, stride, dilation)
GEOMETRIES = [
    (2, 6, 7, 9, 5, (1, 1), (1, 1)),
    (3, 8, 8, 8, 16, (2, 2), (1, 1)),
    (2, 5, 7, 6, 3, (2, 3), (2, 2)),
    (1, 16, 1, 1, 4, (1, 1), (1, 1)),
]


def _spied(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    routed: list[str] = []
    for name in ("conv2d", "conv_transpose2d", "conv2d_grad_weight"):
        kernel = getattr(pointwise_conv, name)
        spy = lambda *a, _k=kernel, _n=name: (routed.append(_n), _k(*a))[1]  # noqa: E731
        monkeypatch.setattr(pointwise_conv, name, spy)
    return routed


@pytest.mark.parametrize("geometry", GEOMETRIES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matches_direct_sum_and_gradients_are_adjoints(geometry, dtype, monkeypatch) -> None:
    n, c, h, wd, o, stride, dilation = geometry
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((n, c, h, wd)), rng.standard_normal((o, c, 1, 1))
    routed = _spied(monkeypatch)
    xt, wt = x.astype(dtype), w.astype(dtype)
    y = conv_gemm.conv2d(np, xt, wt, stride, (0, 0), dilation, 1)
    want = _direct(x, w, stride, (0, 0), dilation, 1)
    tol = 1e-12 if dtype == "float64" else 1e-5
    np.testing.assert_allclose(y, want, rtol=0, atol=tol * np.abs(want).max())
    gy = rng.standard_normal(y.shape).astype(dtype)
    attrs = {"stride": stride, "pad": (0, 0), "dilation": dilation, "groups": 1}
    gx = conv_gemm.conv_transpose2d(np, gy, wt, attrs, (h, wd))
    gw = conv_gemm.conv2d_grad_weight(np, xt, gy, (1, 1), stride, (0, 0), dilation, 1)
    assert routed == ["conv2d", "conv_transpose2d", "conv2d_grad_weight"]
    assert y.dtype == gx.dtype == gw.dtype == dtype
    assert (gx.shape, gw.shape) == (x.shape, w.shape)
    assert all(a.flags.c_contiguous for a in (y, gx, gw))
    inner = float(np.sum(want * gy))  # <conv(x, w), gy> = <x, conv^T(gy)> = <w, grad_w(x, gy)>
    rtol = 1e-11 if dtype == "float64" else 1e-4
    assert np.isclose(float(np.sum(x * gx)), inner, rtol=rtol, atol=rtol)
    assert np.isclose(float(np.sum(w * gw)), inner, rtol=rtol, atol=rtol)


def test_the_input_gradient_fills_an_output_padded_image() -> None:
    # stride 2 from 9x9 gives 5x5; the transposed convolution back to 10x10 (output padding 1)
    # leaves the last row and column, off the stride's grid, zero
    rng = np.random.default_rng(3)
    gy, w = rng.standard_normal((2, 4, 5, 5)), rng.standard_normal((4, 3, 1, 1))
    attrs = {"stride": (2, 2), "pad": (0, 0), "dilation": (1, 1), "groups": 1}
    gx = conv_gemm.conv_transpose2d(np, gy, w, attrs, (10, 10))
    want = np.zeros((2, 3, 10, 10))
    want[:, :, ::2, ::2] = np.einsum("nohw,oc->nchw", gy, w[:, :, 0, 0])
    np.testing.assert_allclose(gx, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    ("ksize", "pad", "groups", "dtype"),
    [((1, 1), (1, 1), 1, "float32"), ((1, 1), (0, 0), 2, "float32"), ((3, 3), (0, 0), 1, "float32"),
     ((1, 1), (0, 0), 1, "int64"), ((1, 1), (0, 0), 1, "float16")],
    ids=["padded", "grouped", "3x3", "int64", "float16"],
)  # fmt: skip
def test_other_convolutions_stay_on_the_columns(ksize, pad, groups, dtype) -> None:
    x = np.zeros((1, 8, 6, 6), dtype)
    assert not pointwise_conv.runs(np, (x, x), ksize, pad, groups)


def test_compiled_pointwise_step_equals_eager() -> None:
    """A stride-2 shortcut and a stride-1 expansion (ResNet's and MobileNetV2's 1x1 layers),
    forward and both gradients, at O0 and O2."""

    def model():
        return nn.Sequential(
            nn.Conv2d(8, 16, 1, stride=2, bias=False),
            nn.ReLU(),
            nn.Conv2d(16, 24, 1),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )

    assert_compiled_equals_eager(model, (4, 8, 9, 9), ("O0", "O2"))


def test_predicted_peak_counts_pointwise_scratch() -> None:
    # a stride-2 layer narrowing 64 channels to 8: the strided pixels' copy (2 MB) is most of
    # the step's peak, the result (256 KB) the rest
    rng = np.random.default_rng(0)
    model = nn.Conv2d(64, 8, 1, stride=2)
    x = dualflow.tensor(rng.normal(size=(8, 64, 64, 64)).astype(np.float32))

    @dualflow.compile
    def forward(x: dualflow.Tensor) -> dualflow.Tensor:
        with dualflow.no_grad():
            return model(x)

    measured, predicted = _measured(forward, x)
    assert abs(measured - predicted) <= 0.1 * predicted, (measured, predicted)
