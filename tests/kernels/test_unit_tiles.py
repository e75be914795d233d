"""The recurrences' per-step products by register tiles (``kernels/linalg/unit_tiles.py``):
``a @ v`` for any row count (full tiles, then single rows) and 1-4 vectors of columns, each
element the same chain of FMAs whatever rows surround it; which batches take them; weight rows
spread apart."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from dualflow.kernels.linalg import unit_tiles
from dualflow.kernels.linalg.tile_ir import LANES
from dualflow.kernels.linalg.unit_tiles import (
    MAX_VECTORS,
    MIN_ROWS,
    ROWS,
    tile_product,
    transposed_rows,
    width,
)


@numba.njit
def _product(a, lda, v, out, first, rows):
    tile_product(rows, v.shape[0], a.ctypes.data + 4 * first * lda, lda, v.ctypes.data,
                 v.shape[1], out.ctypes.data + 4 * first * v.shape[1])  # fmt: skip


def _operands(rows: int, k: int, vectors: int, seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((rows, k), dtype=np.float32)
    return a, rng.standard_normal((k, vectors * LANES), dtype=np.float32)


@pytest.mark.parametrize("vectors", range(1, MAX_VECTORS + 1))
@pytest.mark.parametrize("rows", [1, 3, 16, 37])
def test_the_product_is_a_at_v_for_any_rows_and_vectors(vectors: int, rows: int) -> None:
    a, v = _operands(rows, 70, vectors)
    out = np.full((rows, v.shape[1]), np.nan, np.float32)
    _product(a, a.shape[1], v, out, 0, rows)
    exact = a.astype(np.float64) @ v.astype(np.float64)
    bound = 70 * np.finfo(np.float32).eps * (np.abs(a) @ np.abs(v))  # FMA chains of 70 terms
    assert np.all(np.abs(out - exact) <= bound)


@pytest.mark.parametrize("vectors", [1, 2])
def test_each_rows_bits_do_not_depend_on_the_tile_that_computed_it(vectors: int) -> None:
    rows = 2 * ROWS[vectors - 1] + 3
    a, v = _operands(rows, 200, vectors, seed=1)
    whole = np.empty((rows, v.shape[1]), np.float32)
    _product(a, a.shape[1], v, whole, 0, rows)
    one_by_one = np.empty_like(whole)  # every row a single-row tile
    for r in range(rows):
        _product(a, a.shape[1], v, one_by_one, r, 1)
    shifted = np.empty_like(whole)  # tiles starting one row later
    _product(a, a.shape[1], v, shifted, 0, 1)
    _product(a, a.shape[1], v, shifted, 1, rows - 1)
    spread = transposed_rows(np.ascontiguousarray(a.T), LANES)  # read with a longer stride
    by_spread = np.empty_like(whole)
    _product(spread, spread.shape[1], v, by_spread, 0, rows)
    for other in (one_by_one, shifted, by_spread):
        assert np.array_equal(whole, other)


def test_only_batches_of_whole_vectors_take_the_tiles() -> None:
    assert [width(v * LANES) for v in range(1, MAX_VECTORS + 1)] == [
        v * LANES if ROWS[v - 1] >= MIN_ROWS else 0 for v in range(1, MAX_VECTORS + 1)
    ]
    assert width(LANES) == LANES and width(2 * LANES) == 2 * LANES  # any vector width
    assert width(0) == 0 and width(LANES - 1) == 0 and width(LANES + 1) == 0
    assert width((MAX_VECTORS + 1) * LANES) == 0


@pytest.mark.parametrize("shape", [(3, 4), (40, 33), (1024, 256), (0, 5)])
def test_transposed_rows_are_the_transpose_spread_one_vector_apart(shape) -> None:
    w = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    plain = transposed_rows(w, 0)
    assert plain.flags.c_contiguous and np.array_equal(plain, w.T)
    spread = transposed_rows(w, LANES)
    assert spread.shape == (shape[1], shape[0] + LANES) and spread.dtype == np.float32
    assert np.array_equal(spread[:, : shape[0]], w.T) and not spread[:, shape[0] :].any()
    strided = transposed_rows(w.T.copy().T, LANES)  # any layout of w: the same copy
    assert np.array_equal(strided, spread)


def test_tiles_hold_whole_powers_of_two_rows() -> None:
    assert all(r & (r - 1) == 0 for r in unit_tiles.ROWS)
