"""The 16-wide tile transposes that kernels inline (kernels/linalg/tiles.py), against numpy's
transposes: whole tiles, the feature tail in tiles of 16 rows, the last rows, and strided views
(a convolution copies one image row, a (C, W) view of an NCHW array, at a time)."""

from __future__ import annotations

import numba
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dualflow.kernels.linalg import tiles

SIDES = st.integers(1, 40)  # under, at and over one and two tiles of 16


@numba.njit
def _all_four(rows, fm, out_fm, out_rows, out_sum):
    tiles.to_fm(rows, out_fm)
    tiles.to_rows(fm, out_rows)
    tiles.sum_to_rows(rows, fm, out_sum)
    tiles.add_to_fm(rows, fm)


@settings(max_examples=40, deadline=None)  # the first example compiles the kernel
@given(n=SIDES, features=SIDES, seed=st.integers(0, 2**16))
def test_transposes_equal_numpys(n: int, features: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((n, features), dtype=np.float32)
    fm = rng.standard_normal((features, n), dtype=np.float32)
    outs = (np.empty_like(fm), np.empty_like(rows), np.empty_like(rows))
    before = fm.copy()
    _all_four(rows, fm, *outs)
    np.testing.assert_array_equal(outs[0], rows.T)
    np.testing.assert_array_equal(outs[1], before.T)
    np.testing.assert_array_equal(outs[2], rows + before.T)
    np.testing.assert_array_equal(fm, before + rows.T)


@numba.njit
def _rows_of_an_image(x, out):
    # as layout_copies does: each row of x (C, H, W) into out (H, W, C), through views
    for r in range(x.shape[1]):
        tiles.to_fm(x[:, r, :], out[r])
        tiles.to_rows(out[r], x[:, r, :])


@settings(max_examples=20, deadline=None)
@given(c=SIDES, h=st.integers(1, 5), w=SIDES)
def test_strided_views_of_an_image(c: int, h: int, w: int) -> None:
    x = np.arange(c * h * w, dtype=np.float32).reshape(c, h, w)
    out = np.empty((h, w, c), np.float32)
    _rows_of_an_image(x, out)
    np.testing.assert_array_equal(out, x.transpose(1, 2, 0))
    np.testing.assert_array_equal(x, np.arange(c * h * w, dtype=np.float32).reshape(c, h, w))
