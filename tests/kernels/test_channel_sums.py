"""Per-channel sums (kernels/norm/channel_sums.py, ``sum_to``'s bias-gradient kernel): against a
float64 reference over drawn shapes, the same bits on one or two threads and whatever the
input's layout, NaN and infinities as a sum gives them, and the shapes it leaves to numpy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualflow import ops
from dualflow.background.process import using_threads
from dualflow.kernels.base import native_crew
from dualflow.kernels.base.cpu_threads import run_parts, split
from dualflow.kernels.norm import batch_norm, batch_norm_grad, channel_sums, crew_rows
from dualflow.kernels.numba import native_split

TOL = {np.float32: 1e-6, np.float64: 1e-13}


@settings(max_examples=40, deadline=None)
@given(
    shape=st.lists(st.integers(1, 12), min_size=2, max_size=4).map(tuple),
    start=st.integers(0, 3),
    dtype=st.sampled_from([np.float32, np.float64]),
    seed=st.integers(0, 2**16),
)
def test_sums_match_a_float64_reference(shape, start, dtype, seed) -> None:
    x = (np.random.default_rng(seed).standard_normal((3, *shape)) + 1).astype(dtype)
    kept = tuple(range(min(start, x.ndim - 1), x.ndim - 1))[:1]  # one axis, or none
    got = channel_sums.channel_sums(x, kept)
    if channel_sums.layout(x.shape, kept) is None:
        assert got is None
        return
    axes = tuple(k for k in range(x.ndim) if k not in kept)
    want = x.astype(np.float64).sum(axis=axes)
    assert got.dtype == np.dtype(dtype) and got.shape == want.shape
    scale = np.abs(x.astype(np.float64)).sum(axis=axes) + 1
    assert np.all(np.abs(got - want) <= TOL[dtype] * scale)


def test_the_bits_do_not_depend_on_layout_or_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.random.default_rng(0).standard_normal((6, 7, 9, 9)).astype(np.float32)
    with using_threads(1):
        one = channel_sums.channel_sums(x, (1,))
    parts = []
    monkeypatch.setattr(crew_rows, "run", lambda *args: False)  # cpu_threads' split (crew: below)
    monkeypatch.setattr(channel_sums, "run_over_channels", _split_in_two(parts))
    with using_threads(2):
        two = channel_sums.channel_sums(x, (1,))
    channels_last = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    strided = channel_sums.channel_sums(channels_last, (1,))
    assert parts == [2, 2]  # both split calls ran in two channel ranges
    assert np.array_equal(one, two) and np.array_equal(one, strided)


def _split_in_two(parts: list):
    def run(kernel, args, channels, copied) -> None:
        ranges = split(channels, 2)
        parts.append(len(ranges))
        run_parts([lambda lo=lo, hi=hi: kernel(*args, lo, hi) for lo, hi in ranges])

    return run


def test_nan_and_infinities_as_a_sum_gives_them() -> None:
    x = np.ones((2, 4, 8), np.float32)
    x[1, 1, 3] = np.nan
    x[0, 2, 0], x[1, 2, 5] = np.inf, -np.inf
    x[0, 3, 7] = np.inf
    got = channel_sums.channel_sums(x, (1,))
    assert got[0] == 16 and np.isnan(got[1]) and np.isnan(got[2]) and got[3] == np.inf


def test_what_the_kernel_leaves_to_numpy() -> None:
    f32 = np.ones((4, 3, 8), np.float32)
    assert channel_sums.channel_sums(f32.astype(np.float16), (1,)) is None  # dtype
    assert channel_sums.channel_sums(f32.astype(np.int64), (1,)) is None
    assert channel_sums.channel_sums(f32[:, :, :4], (1,)) is None  # rows under MIN_RUN
    assert channel_sums.channel_sums(f32, (0, 2)) is None  # kept axes not one block
    assert channel_sums.channel_sums(f32, ()) is None


def test_sum_to_takes_the_kernel_for_a_bias_gradient() -> None:
    """``sum_to`` of an (N, C, H, W) gradient to (C, 1, 1), as a conv bias's backward makes it:
    the kernel's float64 sums, rounded once; a row-sum (N, F) -> (F,) stays numpy's."""
    rng = np.random.default_rng(3)
    gy = rng.standard_normal((4, 5, 6, 6)).astype(np.float32)
    got = ops.sum_to(gy, (5, 1, 1))
    want = gy.astype(np.float64).sum(axis=(0, 2, 3)).astype(np.float32).reshape(5, 1, 1)
    assert np.array_equal(np.asarray(got), want)
    rows = rng.standard_normal((7, 5)).astype(np.float32)
    assert np.array_equal(np.asarray(ops.sum_to(rows, (5,))), rows.sum(axis=0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_channel_kernels_split_on_the_crew_give_one_threads_bits(monkeypatch, dtype) -> None:
    """Batch norm's forward and backward and the bias gradients' sums, every call split over
    the native crew (``crew_rows``), against one thread: the same bits."""
    crew = native_crew.crew()
    if crew is None:
        pytest.skip("no native crew on this platform")
    rng = np.random.default_rng(5)
    x, gy = (rng.standard_normal((3, 13, 5, 7)).astype(dtype) for _ in range(2))
    gamma, beta = (rng.standard_normal(13).astype(dtype) for _ in range(2))

    def calls() -> list[np.ndarray]:
        y, mean, var = batch_norm.forward(x, gamma, beta, 1e-5)
        inv_std = (1 / np.sqrt(var + dtype(1e-5))).astype(dtype)
        grads = batch_norm_grad.backward(gy, x, gamma, mean, inv_std)
        return [y, mean, var, *grads, channel_sums.channel_sums(gy, (1,))]

    with monkeypatch.context() as patch:
        patch.setattr(crew_rows, "run", lambda *args: False)
        alone = calls()
    runs: list[bool] = []
    real = crew_rows.crew_ranges.run
    monkeypatch.setattr(native_split, "splits", lambda *args: crew)  # every call splits
    monkeypatch.setattr(crew_rows.crew_ranges, "run", lambda *a: runs.append(real(*a)) or runs[-1])
    split_runs = calls()
    assert runs == [True, True, True]  # each of the three kernels ran on the crew
    assert all(np.array_equal(a, b) for a, b in zip(alone, split_runs))
