"""numba's NCHW <-> channels-last copies: exactly numpy's transposes (and zero border) for any
shape, padding, dtype, strided inputs and split over threads."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualflow.kernels.conv import column_copies, layout_copies


@settings(max_examples=60, deadline=None)
@given(
    st.tuples(*(st.integers(1, 6) for _ in range(4))),
    st.tuples(st.integers(0, 2), st.integers(0, 2)),
    st.sampled_from(["float32", "float64"]),
    st.booleans(),
    st.integers(0, 2**31),
)
def test_copies_equal_numpys_transposes(
    shape: tuple, pad: tuple, dtype: str, strided: bool, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    if strided:  # a transposed view: the kernels read any strides
        x = np.ascontiguousarray(x.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)
    n, c, h, w = x.shape
    want = np.zeros((n, h + 2 * pad[0], w + 2 * pad[1], c), dtype)
    want[:, pad[0] : pad[0] + h, pad[1] : pad[1] + w] = x.transpose(0, 2, 3, 1)
    got = layout_copies.channels_last(x, pad, 1)
    np.testing.assert_array_equal(got.reshape(want.shape), want)
    assert got.dtype == want.dtype and got.shape == (*want.shape[:3], 1, c)
    back = layout_copies.channels_first(np.ascontiguousarray(x.transpose(0, 2, 3, 1)))
    np.testing.assert_array_equal(back, x)
    assert back.flags.c_contiguous


def test_groups_split_the_channels_and_the_split_over_threads_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    x = np.random.default_rng(0).standard_normal((6, 4, 5, 5))
    results = []
    for part_min in (1 << 40, 1):
        monkeypatch.setattr(column_copies, "PART_MIN_BYTES", part_min)
        results.append(layout_copies.channels_last(x, (1, 1), 2))
    np.testing.assert_array_equal(results[0], results[1])
    assert results[0].shape == (6, 7, 7, 2, 2)
    np.testing.assert_array_equal(results[0][:, 1:6, 1:6, 1, 0], x[:, 2])


@settings(max_examples=40, deadline=None)
@given(
    st.tuples(st.integers(1, 70), st.integers(1, 40), st.integers(1, 3), st.integers(1, 3)),
    st.sampled_from(["float32", "float64"]),
    st.booleans(),
)
def test_filter_reorders_equal_numpys_transposes(shape: tuple, dtype: str, split: bool) -> None:
    # tiles of 32 channels: shapes below, at and across a tile's edge; parts over threads or not
    o, c, kh, kw = shape
    w = np.random.default_rng(sum(shape)).standard_normal(shape).astype(dtype)
    saved = layout_copies.PART_MIN_BYTES
    try:
        layout_copies.PART_MIN_BYTES = 1 if split else 1 << 40
        taps = layout_copies.filters_to_taps(w)
        rows = np.ascontiguousarray(taps.T)  # (O, kh*kw*C): what the weight gradient's GEMM gives
        back = layout_copies.rows_to_filters(rows, shape)
    finally:
        layout_copies.PART_MIN_BYTES = saved
    want = np.ascontiguousarray(w.transpose(2, 3, 1, 0)).reshape(kh * kw * c, o)
    np.testing.assert_array_equal(taps, want)
    np.testing.assert_array_equal(back, w)
    assert taps.flags.c_contiguous and back.flags.c_contiguous and back.dtype == w.dtype
