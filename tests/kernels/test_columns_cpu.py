"""numba's im2col/col2im for numpy arrays: bit-equal to the numpy per-tap passes they replace, for
any stride, dilation, padding and groups, and independent of how images are split over threads."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualflow.kernels.base.windows import offsets, out_size
from dualflow.kernels.conv import column_copies, conv_gemm


@st.composite
def _geometry(draw: st.DrawFn) -> dict:
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    p = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    hw = tuple(draw(st.integers(d[i] * (k[i] - 1) + 1, 9)) for i in range(2))
    out = tuple(out_size(hw[i], k[i], s[i], p[i], d[i]) for i in range(2))
    return {
        "n": draw(st.integers(1, 3)),
        "groups": draw(st.integers(1, 2)),
        "cg": draw(st.integers(1, 5)),
        "k": k,
        "d": d,
        "p": p,
        "s": s,
        "hw": hw,
        "out": out,
        "dtype": draw(st.sampled_from(["float32", "float64"])),
    }


def _numpy_columns(xpad: np.ndarray, g: dict) -> np.ndarray:
    n, _, _, groups, cg = xpad.shape
    col = np.empty((n, *g["out"], groups, *g["k"], cg), xpad.dtype)
    for i, j, (rows, cols) in offsets(g["k"], g["s"], g["d"], g["out"]):
        col[:, :, :, :, i, j] = xpad[:, rows, cols]
    return col


def _numpy_add_columns(col: np.ndarray, g: dict) -> np.ndarray:
    n, h, w, groups, _, _, cg = col.shape
    (ph, pw), (oh, ow) = g["p"], g["hw"]
    image = np.zeros((n, oh + 2 * ph, ow + 2 * pw, groups, cg), col.dtype)
    for i, j, (rows, cols) in offsets(g["k"], g["s"], g["d"], (h, w)):
        image[:, rows, cols] += col[:, :, :, :, i, j]
    return image[:, ph : ph + oh, pw : pw + ow]


@settings(max_examples=60, deadline=None)
@given(_geometry(), st.integers(0, 2**31))
def test_columns_and_add_columns_are_bit_equal_to_numpys_per_tap_passes(g: dict, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((g["n"], g["groups"] * g["cg"], *g["hw"])).astype(g["dtype"])
    xpad = conv_gemm.channels_last(np, x, g["p"], g["groups"])
    got = column_copies.columns(xpad, g["k"], g["s"], g["d"], g["out"])
    np.testing.assert_array_equal(got, _numpy_columns(xpad, g))
    assert got.dtype == x.dtype
    col = rng.standard_normal(got.shape).astype(g["dtype"])
    back = column_copies.add_columns(col, g["s"], g["d"], g["p"], g["hw"])
    np.testing.assert_array_equal(back, _numpy_add_columns(col, g))


def test_results_do_not_depend_on_the_split_over_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    g = {"k": (3, 3), "s": (1, 1), "d": (1, 1), "p": (1, 1), "hw": (8, 8), "out": (8, 8)}
    rng = np.random.default_rng(0)
    xpad = conv_gemm.channels_last(np, rng.standard_normal((5, 4, 8, 8)), (1, 1), 1)
    col = rng.standard_normal((5, 8, 8, 1, 3, 3, 4))
    results = []
    for part_min in (1 << 40, 1):  # one part, then one part per thread
        monkeypatch.setattr(column_copies, "PART_MIN_BYTES", part_min)
        results.append(
            (
                column_copies.columns(xpad, g["k"], g["s"], g["d"], g["out"]),
                column_copies.add_columns(col, g["s"], g["d"], g["p"], g["hw"]),
            )
        )
    for one, split in zip(*results, strict=True):
        np.testing.assert_array_equal(one, split)


def test_only_numpy_float_arrays_of_one_dtype_take_the_numba_path() -> None:
    assert column_copies.available(np.zeros(2, np.float32), np.zeros(2, np.float32))
    assert not column_copies.available(np.zeros(2, np.float32), np.zeros(2, np.float64))
    assert not column_copies.available(np.zeros(2, np.int32))
    assert not column_copies.available([0.0, 1.0])
