"""kernels.linalg.gemm: numpy's matmul results for every rank case, operand layout and out=.

The one-GEMM route sums in BLAS's order for one large product instead of one per matrix, so
results match numpy's to float rounding (not bit for bit); compiled and eager both run it.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dualflow.kernels.linalg import gemm

_LAYOUTS = ("c", "transposed", "strided")


def _laid_out(rng: np.random.Generator, shape: tuple[int, ...], layout: str) -> np.ndarray:
    # the same values, stored C-ordered, with the last two axes swapped, or as every other row
    if layout == "transposed" and len(shape) >= 2:
        base = rng.normal(size=(*shape[:-2], shape[-1], shape[-2])).astype(np.float32)
        return np.swapaxes(base, -1, -2)
    if layout == "strided" and len(shape) >= 2:
        base = rng.normal(size=(*shape[:-2], 2 * shape[-2], shape[-1])).astype(np.float32)
        return base[..., ::2, :]
    return rng.normal(size=shape).astype(np.float32)


@settings(max_examples=60, deadline=None)
@given(
    lead=st.lists(st.integers(0, 3), min_size=0, max_size=2),
    m=st.integers(1, 5),
    k=st.integers(1, 6),
    n=st.integers(1, 5),
    layouts=st.tuples(st.sampled_from(_LAYOUTS), st.sampled_from(_LAYOUTS)),
    b_rank=st.sampled_from([1, 2, 3]),
    seed=st.integers(0, 2**16),
)
def test_matches_numpy(lead, m, k, n, layouts, b_rank, seed) -> None:
    rng = np.random.default_rng(seed)
    a = _laid_out(rng, (*lead, m, k), layouts[0])
    b_shape = {1: (k,), 2: (k, n), 3: (*lead[-1:], k, n)}[b_rank]
    b = _laid_out(rng, b_shape, layouts[1])
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    got = gemm.matmul(np, a, b)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    out = np.full(want.shape, np.nan, np.float32)
    assert gemm.matmul(np, a, b, out=out) is out
    np.testing.assert_array_equal(out, got)  # the same GEMM with or without out=


def test_stack_times_matrix_is_one_gemm_into_a_strided_out() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(3, 4, 5)), rng.normal(size=(5, 2))
    assert gemm.stacked_rows(a, b) and not gemm.stacked_rows(b, a)
    out = np.zeros((3, 4, 4))[..., ::2]  # not C-contiguous: written through a copy
    gemm.matmul(np, a, b, out=out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-12)
    np.testing.assert_array_equal(
        gemm.matmul(np, a[:, ::2], b), gemm.matmul(np, a[:, ::2].copy(), b)
    )


def test_few_rows_times_a_transposed_matrix_is_computed_transposed(monkeypatch) -> None:
    monkeypatch.setattr(gemm, "thin_rows", lambda: 4)  # the machine's measured count, any value
    rng = np.random.default_rng(1)
    w = rng.normal(size=(7, 5)).astype(np.float32)
    for rows in (1, gemm.thin_rows()):
        x = rng.normal(size=(rows, 5)).astype(np.float32)
        assert gemm.thin_times_transposed(x, w.T)
        got = gemm.matmul(np, x, w.T)
        assert got.flags.c_contiguous  # the op's layout fact: C-ordered results
        np.testing.assert_allclose(got, x.astype(np.float64) @ w.T, rtol=1e-5, atol=1e-6)
    wide = rng.normal(size=(gemm.thin_rows() + 1, 5))
    assert not gemm.thin_times_transposed(wide, w.T)
    assert not gemm.thin_times_transposed(wide[:2], np.ascontiguousarray(w.T))


def test_a_gemm_for_blas_threads_wakes_the_crew_after_it(monkeypatch) -> None:
    # products beyond OpenBLAS's one-thread size (a stack of rows or a plain 2-D product) nudge
    # the crew once they return; small ones and batches of small matrices do not
    nudges: list[int] = []
    monkeypatch.setattr(gemm.native_crew, "nudge", lambda: nudges.append(1))
    big = np.ones((64, 128), np.float32)
    gemm.matmul(np, big, np.ones((128, 64), np.float32))  # 64 * 128 * 64 > SMALL_MNK
    assert nudges == [1]
    gemm.matmul(np, big.reshape(2, 32, 128), np.ones((128, 64), np.float32))
    assert nudges == [1, 1]
    gemm.matmul(np, np.ones((4, 8), np.float32), np.ones((8, 4), np.float32))
    gemm.matmul(np, np.ones((3, 8, 8), np.float32), np.ones((3, 8, 8), np.float32))
    assert nudges == [1, 1]
