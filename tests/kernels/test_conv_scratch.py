"""The convolution kernels' scratch facts (kernels/conv/conv_scratch.py) against what the kernels
allocate: tracemalloc's peak during a call, less its result, on the routes the facts follow
(im2col columns, the weight read as rows for deep layers on few pixels, Winograd tiles)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

# (x shape, w shape, stride): im2col, rows (more filters than output pixels), and
from dualflow.kernels.conv import conv_gemm, conv_scratch

# Winograd; every kernel runs once before it is measured (numba compiles on first use)
CASES = [
    ((4, 8, 12, 12), (16, 8, 3, 3), 1),
    ((2, 64, 4, 4), (128, 64, 3, 3), 1),
    ((2, 64, 8, 8), (128, 64, 3, 3), 2),
    ((4, 16, 16, 16), (16, 16, 3, 3), 1),
]


def _allocated(call) -> int:
    """Bytes a call holds at its peak beyond what it returns."""
    call()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = call()
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    return peak - result.nbytes


@pytest.mark.parametrize(("x_shape", "w_shape", "stride"), CASES)
def test_scratch_facts_match_what_the_kernels_allocate(x_shape, w_shape, stride) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    attrs = {"stride": (stride,) * 2, "pad": (1, 1), "dilation": (1, 1), "groups": 1}
    y = conv_gemm.conv2d(np, x, w, attrs["stride"], (1, 1), (1, 1), 1)
    gy = rng.standard_normal(y.shape).astype(np.float32)
    geometry = (attrs["stride"], (1, 1), (1, 1), 1)
    calls = {
        "conv2d": (
            lambda: conv_gemm.conv2d(np, x, w, *geometry),
            conv_scratch.conv2d_scratch(x.shape, w.shape, 4, attrs),
        ),
        "conv_transpose2d": (
            lambda: conv_gemm.conv_transpose2d(np, gy, w, attrs, x.shape[2:]),
            conv_scratch.conv_transpose2d_scratch(
                gy.shape, w.shape, 4, {**attrs, "output_padding": _padding(x, gy, stride)}
            ),
        ),
        "conv2d_grad_weight": (
            lambda: conv_gemm.conv2d_grad_weight(np, x, gy, (3, 3), *geometry),
            conv_scratch.conv2d_grad_weight_scratch(
                x.shape, gy.shape, 4, {**attrs, "ksize": (3, 3)}
            ),
        ),
    }
    for name, (call, fact) in calls.items():
        measured = _allocated(call)
        # a few KB of Python and numpy bookkeeping besides the arrays
        assert abs(measured - fact) <= 0.1 * fact + 8192, (name, measured, fact)


def _padding(x, gy, stride) -> tuple[int, int]:
    # the output padding that makes conv_transpose2d of gy x's size (3x3, pad 1)
    return tuple(x.shape[2 + k] - ((gy.shape[2 + k] - 1) * stride + 1) for k in range(2))
