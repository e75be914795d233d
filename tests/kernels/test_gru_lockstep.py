"""The GRU recurrences split by hidden units into two parts run in lockstep
(``kernels/linalg/gru_lockstep.py``): forward and backward give the bits of the one-GEMM loops
when those multiply the same row blocks, on two threads or one, and an ``nn.GRU`` training step
takes them, compiled equal to eager."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings

from dualflow.background.process import using_threads
from dualflow.kernels.linalg import gru_forward as forward_module
from dualflow.kernels.linalg import gru_lockstep, recurrence, unit_parts, unit_tiles
from dualflow.kernels.linalg.tile_ir import LANES
from dualflow.kernels.linalg.unit_parts import gate_rows_by_part, unit_bounds
from tests.kernels.lockstep_reference import (
    FORWARD_SIZES,
    assert_same_bits,
    assert_train_steps_agree,
    backward_sizes,
    by_parts,
    drawn_gradients,
    force_row_blocks,
    partitioned_carry,
)
from tests.kernels.recurrent_cells import scaled_inputs

pytestmark = pytest.mark.skipif(
    not unit_parts.fits(np, np.float32, 64, 16), reason="numpy's BLAS has no 64-bit cblas_sgemm"
)


def _inputs(seed: int, steps: int, n: int, hidden: int, scale: float) -> list:
    shapes = [(steps, n, 3 * hidden), (n, hidden), (3 * hidden, hidden), (3 * hidden,)]
    return scaled_inputs(seed, shapes, hidden, scale, weight=2)


def _forward_reference(xw, h0, w, bias):
    # the one-GEMM loop's cell kernel, fed the parts' products
    steps, n, three_h = xw.shape
    hidden, bounds = three_h // 3, unit_bounds(three_h // 3)
    w_parts = gate_rows_by_part(w, bounds, 3)
    cell = forward_module.one_gemm_cell()  # the loop's own kernel, stem and all
    hs, hn = np.empty((steps, n, hidden), np.float32), np.empty((steps, n, hidden), np.float32)
    gates, h_fm = np.empty((steps, n, three_h), np.float32), np.empty((hidden, n), np.float32)
    h, h_prev = np.ascontiguousarray(h0.T), h0
    for t in range(steps):
        product = by_parts(w_parts, h, bounds, 3, tiles=True)
        cell(xw[t], product, bias, h_fm, h_prev, gates[t], hs[t], hn[t])
        h, h_prev = h_fm.copy(), hs[t]
    return hs, gates, hn


@settings(max_examples=20, deadline=None)  # the first example compiles the kernels
@given(**FORWARD_SIZES)
def test_forward_equals_the_one_gemm_cell_on_the_same_row_blocks(
    steps, n, hidden, scale, seed, blocked
) -> None:
    ins = _inputs(seed, steps, n, hidden, scale)
    with pytest.MonkeyPatch.context() as patch:
        if blocked:  # one-tile blocks of the parts' rows
            force_row_blocks(patch, unit_parts.TILE * n * hidden + 1)
        assert_same_bits(lambda: forward_module.gru_forward(*ins), lambda: _forward_reference(*ins))


def _backward(saved, grads, lockstep_on: bool, monkeypatch: pytest.MonkeyPatch):
    with monkeypatch.context() as patch:
        if not lockstep_on:
            patch.setattr(unit_parts, "fits", lambda xp, dtype, hidden, batch: False)
            patch.setattr(recurrence, "carry", functools.partial(partitioned_carry, tiles=True))
        return recurrence.gru_grad_recurrence(np, saved, grads, np.float32)


@settings(max_examples=20, deadline=None)
@given(**backward_sizes(2))
def test_backward_equals_the_one_gemm_loop_on_the_same_row_blocks(
    steps, n, hidden, present, seed, blocked
) -> None:
    xw, h0, w, bias = _inputs(seed, steps, n, hidden, 1.0)
    hs, gates, hn = forward_module.gru_forward(xw, h0, w, bias)
    grads = drawn_gradients(seed, ((steps, n, hidden), (steps, n, 3 * hidden)), present)
    saved = (gates, hn, hs, h0, w)
    with pytest.MonkeyPatch.context() as patch:
        if blocked:
            force_row_blocks(patch, unit_parts.TILE * n * 3 * hidden + 1)
        assert_same_bits(
            lambda: _backward(saved, grads, True, patch),
            lambda: _backward(saved, grads, False, patch),
        )


def test_the_bits_do_not_depend_on_the_thread_count(monkeypatch) -> None:
    ins = _inputs(5, 6, 9, 80, 1.0)
    two = forward_module.gru_forward(*ins)
    with using_threads(1, blas_too=True):  # set_num_threads(1): both parts on this thread
        one = forward_module.gru_forward(*ins)
    assert all(np.array_equal(a, b) for a, b in zip(one, two))


@pytest.mark.parametrize("blocked", [False, True])
def test_a_gru_training_step_takes_it_compiled_and_eager_alike(monkeypatch, blocked) -> None:
    assert_train_steps_agree(gru_lockstep, "GRU", monkeypatch, blocked)


def test_a_batch_of_whole_vectors_takes_the_tiles_compiled_and_eager_alike(monkeypatch) -> None:
    assert_train_steps_agree(gru_lockstep, "GRU", monkeypatch, False, batch=LANES)


@pytest.mark.parametrize(("n", "hidden"), [(LANES, 64), (3 * LANES, 128)])
def test_the_rows_form_gives_the_feature_major_bits_both_ways(monkeypatch, n, hidden) -> None:
    bounds = unit_bounds(hidden)
    assert unit_tiles.rows_fit(n, bounds) and unit_tiles.rows_fit(n, bounds, vectors=2)
    xw, h0, w, bias = _inputs(17, 5, n, hidden, 1.0)
    rows = forward_module.gru_forward(xw, h0, w, bias)
    hs, gates, hn = rows
    grads = drawn_gradients(17, ((5, n, hidden), (5, n, 3 * hidden)), (True, True))
    saved = (gates, hn, hs, h0, w)
    rows_grads = _backward(saved, grads, True, monkeypatch)
    monkeypatch.setattr(unit_tiles, "rows_fit", lambda n, bounds, vectors=1: False)
    feature_major = forward_module.gru_forward(xw, h0, w, bias)
    assert all(np.array_equal(a, b) for a, b in zip(rows, feature_major))
    again = _backward(saved, grads, True, monkeypatch)
    assert all(np.array_equal(a, b) for a, b in zip(rows_grads, again))
