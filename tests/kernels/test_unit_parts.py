"""What the split recurrences share (``kernels/linalg/unit_parts.py``): a part's GEMM cut into
row blocks within OpenBLAS's small-matrix limits where its table has that kernel, the blocked
product equal to the same blocks' own calls, and the weights' rows packed by part."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dualflow.kernels.linalg import cblas, unit_parts
from dualflow.kernels.linalg.unit_parts import gate_rows_by_part, gemm_rows, row_block, unit_bounds
from tests.kernels.lockstep_reference import gemm


def _table(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setattr(unit_parts.blas_cores, "core_name", lambda: name)


def test_row_blocks_stay_within_openblas_small_matrix_limits(monkeypatch) -> None:
    _table(monkeypatch, "SkylakeX")
    assert row_block(16, 256, False) == 240  # 10^6 // (16 * 256) = 244, whole tiles
    assert row_block(16, 1024, True) == 48  # 61 rows by size; the transposed limit is 75
    assert row_block(8, 1024, True) == 112  # 122 by size, 150 by the transposed limit
    assert row_block(32, 64, True) == 32  # 1200 // 32 = 37 outputs' rows, not 488
    assert row_block(32, 1024, True) == 0  # 16 rows: below MIN_BLOCK, one call
    assert row_block(0, 256, False) == 0 and row_block(16, 0, False) == 0
    for rows in (
        row_block(n, k, t) for n in (8, 13, 16, 64) for k in (64, 256, 1024) for t in (0, 1)
    ):
        assert rows == 0 or (rows % unit_parts.TILE == 0 and rows >= unit_parts.MIN_BLOCK)


@pytest.mark.parametrize("table", ["Haswell", "Zen", None])
def test_tables_without_the_small_kernel_keep_one_call(monkeypatch, table) -> None:
    _table(monkeypatch, table)
    assert row_block(16, 256, False) == row_block(16, 1024, True) == 0


@pytest.mark.skipif(cblas.sgemm() is None, reason="numpy's BLAS has no 64-bit cblas_sgemm")
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("block", [0, 16, 32, 50])
def test_blocked_product_is_each_blocks_own_call(transposed, block) -> None:
    rng = np.random.default_rng(block)
    rows, n, k = 83, 9, 40  # rows not a multiple of any block: a short last block
    a = rng.standard_normal((rows, k), dtype=np.float32)
    b = rng.standard_normal((n, k) if transposed else (k, n), dtype=np.float32)
    trans = cblas.TRANS if transposed else cblas.NO_TRANS
    out = np.full((rows, n), np.nan, np.float32)
    gemm_rows(cblas.sgemm(), trans, rows, n, k, a.ctypes.data, b.ctypes.data, b.shape[1],
              out.ctypes.data, block)  # fmt: skip
    assert np.array_equal(out, gemm(a, b, transposed, block))  # each block's own call
    exact = a.astype(np.float64) @ (b.T if transposed else b).astype(np.float64)
    np.testing.assert_allclose(out, exact, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("pad", [0, 16])
def test_gate_rows_by_part_groups_each_parts_gates_in_one_copy(pad: int) -> None:
    gates, hidden, width = 4, 40, 7
    w = np.random.default_rng(3).standard_normal((gates * hidden, width)).astype(np.float32)
    bounds = unit_bounds(hidden)
    packed = gate_rows_by_part(w, bounds, gates, pad=pad)
    assert packed.shape == (gates * hidden, width + pad) and packed.dtype == np.float32
    expected = [w[g * hidden + a : g * hidden + b] for a, b in itertools.pairwise(bounds)
                for g in range(gates)]  # fmt: skip
    assert np.array_equal(packed[:, :width], np.concatenate(expected))
    assert not packed[:, width:].any()
    bias = np.arange(gates * hidden, dtype=np.float32)  # a 1-D w: the same order
    assert np.array_equal(gate_rows_by_part(bias, bounds, gates), np.concatenate(
        [bias[g * hidden + a : g * hidden + b] for a, b in itertools.pairwise(bounds)
         for g in range(gates)]))  # fmt: skip
