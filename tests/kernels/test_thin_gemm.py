"""Few-row products ``x @ W.T`` on register tiles (kernels/linalg/thin_gemm.py, tile_ir.py):
against a float64 reference over drawn shapes (remainder tiles, partial vectors, out= or not);
each row's bits the same whatever batch it is computed in, whether the tiles are split over the
crew, and whatever the tile; which operands the route takes; ``gemm.matmul`` taking it only up to
the machine's measured row count; an MLP's training step on it compiled equal to eager."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dualflow
from dualflow import ops
from dualflow.kernels.base import crew_ranges, native_crew
from dualflow.kernels.linalg import gemm, thin_gemm
from dualflow.kernels.linalg.tile_ir import LANES, rows_for

ROWS = 4 * LANES


@pytest.fixture
def tiles_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """The route on for every row count it can take (the suite's machine constants are the
    defaults: 0 rows, the route off)."""
    monkeypatch.setattr(thin_gemm, "row_limit", lambda k: ROWS)
    monkeypatch.setattr(thin_gemm, "max_rows", lambda: ROWS)


def _operands(rng: np.random.Generator, m: int, k: int, n: int) -> tuple:
    return rng.standard_normal((m, k), np.float32), rng.standard_normal((n, k), np.float32)


@settings(max_examples=40, deadline=None)  # the first examples compile the kernels
@given(
    m=st.integers(1, ROWS),
    k=st.integers(1, 300),
    n=st.integers(1, 200),
    into=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_the_product_matches_a_float64_reference(m, k, n, into, seed) -> None:
    x, w = _operands(np.random.default_rng(seed), m, k, n)
    out = np.full((m, n), np.nan, np.float32) if into else None
    product = thin_gemm.matmul(x, w.T, out)
    assert product.dtype == np.float32 and product.shape == (m, n)
    assert out is None or product is out
    reference = x.astype(np.float64) @ w.T.astype(np.float64)
    scale = np.abs(x).astype(np.float64) @ np.abs(w.T).astype(np.float64)
    assert np.all(np.abs(product - reference) <= 1e-6 * k * scale + 1e-30)


def test_a_rows_bits_do_not_depend_on_its_batch_or_tile() -> None:
    # one FMA chain over K per element: a row alone (one vector, the tallest tile), in a batch of
    # ROWS (four vectors, the shortest tile), or of 17 rows gives the same bits
    x, w = _operands(np.random.default_rng(1), ROWS, 250, 97)
    batch = thin_gemm.matmul(x, w.T)
    for rows in (1, 17):
        part = thin_gemm.matmul(np.ascontiguousarray(x[:rows]), w.T)
        np.testing.assert_array_equal(part, batch[:rows])
    assert rows_for(1) != rows_for(4)


def test_the_crews_split_has_the_same_bits_as_one_call() -> None:
    crew = native_crew.crew()
    if crew is None:
        pytest.skip("no native crew on this platform")
    x, w = _operands(np.random.default_rng(2), 40, 130, 301)
    vectors = -(-40 // LANES)
    xt = np.zeros((130, vectors * LANES), np.float32)
    thin_gemm.pack(x, xt)
    count = -(-301 // rows_for(vectors))
    alone, split = np.empty((40, 301), np.float32), np.empty((40, 301), np.float32)
    thin_gemm.tiles(w, xt, alone, vectors, 0, count)
    addresses = (w.ctypes.data, xt.ctypes.data, split.ctypes.data)
    block = np.array([0, count, 301, 130, 40, vectors, *addresses], np.int64)
    assert crew_ranges.run(crew, crew_ranges.entry_at(thin_gemm.entry), block)
    np.testing.assert_array_equal(alone, split)


def test_which_operands_the_route_takes(tiles_taken: None) -> None:
    x, w = np.ones((8, 64), np.float32), np.ones((70, 64), np.float32)
    assert thin_gemm.takes(x, w.T) and thin_gemm.takes(x, w.T, np.empty((8, 70), np.float32))
    refused = [
        (x, w.T.copy(), None),  # W.T not a transposed C-ordered matrix
        (np.asfortranarray(x), w.T, None),  # x not C-ordered
        (x.astype(np.float64), w.T.astype(np.float64), None),  # float64
        (np.ones((ROWS + 1, 64), np.float32), w.T, None),  # too many rows
        (x[:, :63].copy(), w[:, :63].T, None),  # K below MIN_SIDE
        (x, w[:63].T, None),  # N below MIN_SIDE
        (x, w.T, np.empty((70, 8), np.float32).T),  # out not C-ordered
        (x[None], w.T, None),  # a batch of matrices
    ]
    square = np.ones((64, 64), np.float32)
    refused += [(square, square.T, square), (square.T.copy(), square.T, square.T.T)]  # overlaps
    for a, b, out in refused:
        assert not thin_gemm.takes(a, b, out)


def test_gemm_takes_the_route_up_to_the_measured_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    original = thin_gemm.matmul
    monkeypatch.setattr(thin_gemm, "matmul", lambda *a: calls.append(a[0].shape) or original(*a))
    x, w = _operands(np.random.default_rng(3), 16, 100, 80)
    for rows in (0, 8, 16):
        monkeypatch.setattr(thin_gemm, "row_limit", lambda k, rows=rows: rows)
        product = gemm.matmul(np, x, w.T)
        if rows == 16:
            np.testing.assert_array_equal(product, original(x, w.T))
    assert calls == [(16, 100)]


def test_the_probe_measures_every_candidate_and_reads_only_valid_records() -> None:
    for transposed_up_to in (0, 64):  # against the direct product, then the transposed one
        assert sorted(thin_gemm.measure((64, 32), transposed_up_to, (1, LANES))) == [1, LANES]
    valid = [thin_gemm.CANDIDATES[-1], 0]
    assert thin_gemm._read({"rows": valid}) == tuple(valid)
    for record in ({"rows": [3, 0]}, {"rows": [64]}, {"rows": 64}, {"rows": ["64", 0]}, [], None):
        assert thin_gemm._read(record) is None


def test_a_product_takes_the_limit_of_the_probe_nearest_its_k(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(thin_gemm._ROWS, "get", lambda: (8, 64))  # K = 256 probe, K = 1024 probe
    assert [thin_gemm.row_limit(k) for k in (64, 256, 511, 513, 784, 4096)] == [8, 8, 8, 64, 64, 64]
    assert thin_gemm.max_rows() == 64
    x, w = np.ones((16, 300), np.float32), np.ones((80, 300), np.float32)
    assert not thin_gemm.takes(x, w.T)  # 16 rows, K = 300: the K = 256 probe's 8 rows
    x, w = np.ones((16, 800), np.float32), np.ones((80, 800), np.float32)
    assert thin_gemm.takes(x, w.T)


def test_an_mlp_step_on_the_tiles_compiles_equal_to_eager(
    tiles_taken: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dualflow.bench.workloads import WORKLOADS  # the bench's MLP: 64 x 784 x 1000 first

    calls = []
    original = thin_gemm.matmul
    monkeypatch.setattr(thin_gemm, "matmul", lambda *a: calls.append(1) or original(*a))
    results = []
    for compiled in (False, True):
        w = WORKLOADS["mlp"].build(np.random.default_rng(0))
        step = dualflow.compile(w["step"]) if compiled else w["step"]
        losses = [np.asarray(step().numpy()).copy() for _ in range(3)]
        results.append(losses + [p.numpy().copy() for p in w["params"]])
    for eager, compiled in zip(*results):
        np.testing.assert_array_equal(eager, compiled)
    assert len(calls) >= 12  # both layers' forward products, three steps, both modes


def test_the_matmul_scratch_fact_counts_the_packed_rows(tiles_taken: None) -> None:
    from dualflow.ops import OPS

    scratch = OPS["matmul"].scratch
    f32 = np.dtype(np.float32)
    assert scratch((((16, 100), f32), ((100, 80), f32)), {}) >= 100 * LANES * 4
    assert scratch((((0, 100), f32), ((100, 80), f32)), {}) == 0  # an empty batch: no route
    f64 = np.dtype(np.float64)  # not the tiles' (float32 only): the transposed product's
    assert scratch((((16, 100), f64), ((100, 80), f64)), {}) == 16 * 80 * 8


def _transposed_constant(x: object) -> object:
    return ops.tanh(x @ dualflow.tensor(W_CONST).T)  # folding may build W.T anew


def _many_transposes(x: object) -> object:
    return x @ dualflow.tensor(W_CONST).T.T.T  # W.T after more transposes


def _f_ordered_left(x: object) -> object:
    # x.T's tanh keeps x.T's layout eagerly (not C-ordered: the BLAS route); a plan must too
    return ops.tanh(x.T.T.T) @ dualflow.tensor(W_NARROW).T


W_CONST = np.random.default_rng(4).standard_normal((70, 90)).astype(np.float32)
W_NARROW = W_CONST[:, :9].copy()


@pytest.mark.parametrize("fn", [_transposed_constant, _many_transposes, _f_ordered_left])
def test_compiled_takes_the_route_eager_takes_whatever_the_layouts(tiles_taken, monkeypatch, fn):
    # the route depends on the operands' layouts: a plan that built W.T C-ordered, or x
    # C-ordered where eager's is not, would route differently and change bits unannounced. The
    # operands are drawn so that the tiles' bits and the BLAS's differ: equal results mean the
    # same route (counting calls would not do: the tracer replays a spy's side effects)
    monkeypatch.setattr(thin_gemm, "MIN_SIDE", 1)
    x = np.random.default_rng(5).standard_normal((9, 90)).astype(np.float32)
    assert not np.array_equal(thin_gemm.matmul(x, W_CONST.T), x @ W_CONST.T)
    arg = dualflow.tensor(x if fn is not _f_ordered_left else x[:, :9].T.copy())
    eager = fn(arg).numpy()
    compiled = dualflow.compile(fn)
    for _ in range(3):
        np.testing.assert_array_equal(compiled(arg).numpy(), eager)
