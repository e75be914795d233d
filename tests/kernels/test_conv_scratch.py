"""The convolution kernels' scratch facts (kernels/conv/conv_scratch.py) against what the kernels
allocate: tracemalloc's peak during a call, less its result, on the routes the facts follow
(im2col columns, the weight read as rows for deep layers on few pixels, Winograd tiles)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

# (x shape, w shape, stride): im2col, rows (more filters than output pixels), and
from dualflow.background.process import using_threads
from dualflow.kernels.conv import conv_gemm, conv_scratch, winograd

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


@pytest.mark.parametrize("threads", [1, 2])
def test_winograd_scratch_counts_the_chunks_run_at_once(threads) -> None:
    # one image a chunk (8 chunks): with two threads two chunks run at once, so the fact counts
    # two chunks' tiles and sums; how far their lifetimes overlap depends on timing, so the
    # measured peak lies between one chunk's fact and the fact
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 16, 64, 64)).astype(np.float32)
    w = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    gy = rng.standard_normal((8, 16, 64, 64)).astype(np.float32)
    calls = {
        "conv2d": (
            lambda: winograd.conv2d(x, w, (1, 1)),
            lambda: winograd.conv2d_scratch(x.shape, w.shape, 4, (1, 1)),
        ),
        "conv2d_grad_weight": (
            lambda: winograd.conv2d_grad_weight(x, gy, (1, 1)),
            lambda: winograd.conv2d_grad_weight_scratch(x.shape, gy.shape, 4),
        ),
    }
    for name, (call, fact) in calls.items():
        with using_threads(1):
            alone = fact()
        with using_threads(threads):
            measured, at_once = _allocated(call), fact()
        assert (at_once > alone) == (threads > 1), (name, at_once, alone)
        assert alone - 0.1 * alone - 8192 <= measured <= 1.1 * at_once + 8192, (name, measured)
