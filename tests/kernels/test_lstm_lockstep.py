"""The LSTM recurrences split by hidden units into two parts run in lockstep
(``kernels/linalg/lstm_lockstep.py``): forward and backward give the bits of the one-GEMM loops
when those multiply the same row blocks, whatever runs the parts (two threads, one, or one
because the workers are busy), and the op and the ``nn.LSTM`` training step take them."""

from __future__ import annotations

import functools
import threading

import numpy as np
import pytest
from hypothesis import given, settings

from dualflow.background.process import owner, using_threads
from dualflow.kernels.base import cpu_threads, lockstep
from dualflow.kernels.linalg import lstm_forward as forward_module
from dualflow.kernels.linalg import lstm_lockstep, recurrence, unit_parts, unit_tiles
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
    shapes = [(steps, n, 4 * hidden), (n, hidden), (n, hidden), (4 * hidden, hidden)]
    return scaled_inputs(seed, shapes, hidden, scale, weight=3)


def _forward_reference(xw, h0, c0, w):
    # the one-GEMM loop's cell kernel, fed the parts' products
    steps, n, four_h = xw.shape
    hidden, bounds = four_h // 4, unit_bounds(four_h // 4)
    w_parts = gate_rows_by_part(w, bounds, 4)
    cell = forward_module.one_gemm_cell()  # the loop's own kernel, stem and all
    hs, cs = np.empty((steps, n, hidden), np.float32), np.empty((steps, n, hidden), np.float32)
    gates, h_fm = np.empty((steps, n, four_h), np.float32), np.empty((hidden, n), np.float32)
    h, c_prev = np.ascontiguousarray(h0.T), c0
    for t in range(steps):
        cell(xw[t], by_parts(w_parts, h, bounds, 4, tiles=True), h_fm, c_prev, gates[t], hs[t],
             cs[t])  # fmt: skip
        h, c_prev = h_fm.copy(), cs[t]
    return hs, cs, gates


@settings(max_examples=25, deadline=None)  # the first example compiles the kernels
@given(**FORWARD_SIZES)
def test_forward_equals_the_one_gemm_cell_on_the_same_row_blocks(
    steps, n, hidden, scale, seed, blocked
) -> None:
    ins = _inputs(seed, steps, n, hidden, scale)
    with pytest.MonkeyPatch.context() as patch:
        if blocked:  # one-tile blocks of the parts' rows
            force_row_blocks(patch, unit_parts.TILE * n * hidden + 1)
        assert_same_bits(
            lambda: forward_module.lstm_forward(*ins), lambda: _forward_reference(*ins)
        )


def _backward(saved, grads, lockstep_on: bool, monkeypatch: pytest.MonkeyPatch):
    with monkeypatch.context() as patch:
        if not lockstep_on:
            patch.setattr(unit_parts, "fits", lambda xp, dtype, hidden, batch: False)
            patch.setattr(recurrence, "carry", functools.partial(partitioned_carry, tiles=True))
        with cpu_threads.blas_on_callers():
            tanh = lambda xp, x: np.tanh(x)  # noqa: E731 - float32 inlines tanh_f32 instead
            return recurrence.lstm_grad_recurrence(np, saved, grads, np.float32, tanh)


@settings(max_examples=20, deadline=None)
@given(**backward_sizes(3))
def test_backward_equals_the_one_gemm_loop_on_the_same_row_blocks(
    steps, n, hidden, present, seed, blocked
) -> None:
    ins = _inputs(seed, steps, n, hidden, 1.0)
    _, cs, acts = forward_module.lstm_forward(*ins)
    shapes = ((steps, n, hidden), (steps, n, hidden), (steps, n, 4 * hidden))
    grads = drawn_gradients(seed, shapes, present)
    saved = (acts, cs, ins[2], ins[3])
    with pytest.MonkeyPatch.context() as patch:
        if blocked:
            force_row_blocks(patch, unit_parts.TILE * n * 4 * hidden + 1)
        assert_same_bits(
            lambda: _backward(saved, grads, True, patch),
            lambda: _backward(saved, grads, False, patch),
        )


def _run_three_ways(monkeypatch: pytest.MonkeyPatch) -> list:
    ins = _inputs(7, 6, 9, 80, 1.0)
    runs = [forward_module.lstm_forward(*ins)]  # the parts on both threads
    with using_threads(1, blas_too=True):  # set_num_threads(1): both parts on this thread
        runs.append(forward_module.lstm_forward(*ins))
    lock = owner().crew.lock
    assert lock.acquire(timeout=10)  # the workers busy: run_parts runs the loops one by one
    try:
        runs.append(forward_module.lstm_forward(*ins))
    finally:
        lock.release()
    return runs


def test_the_bits_do_not_depend_on_what_runs_the_parts(monkeypatch) -> None:
    first, *others = _run_three_ways(monkeypatch)
    for other in others:
        assert all(np.array_equal(a, b) for a, b in zip(first, other))


def test_another_blas_caller_keeps_the_parts_on_this_thread(monkeypatch) -> None:
    ran: list[int] = []
    run_parts = lockstep.run_parts
    monkeypatch.setattr(
        lockstep, "run_parts", lambda jobs: ran.append(len(jobs)) or run_parts(jobs)
    )
    ins = _inputs(3, 4, 9, 64, 1.0)
    alone = forward_module.lstm_forward(*ins)[0]
    assert ran == [min(unit_parts.PARTS, lockstep.threads())]  # alone: on the workers
    stop = threading.Event()
    user = threading.Thread(target=stop.wait)
    user.start()
    try:
        hs = forward_module.lstm_forward(*ins)[0]  # no lowering: never on the workers
    finally:
        stop.set()
        user.join()
    assert len(ran) == 1 and np.isfinite(hs).all()
    np.testing.assert_allclose(hs, alone, atol=1e-5)  # rounded by OpenBLAS's own count


def test_unit_bounds_keep_whole_tiles_and_small_layers_stay_whole() -> None:
    for hidden in (32, 33, 48, 100, 256, 1000):
        a, split, b = unit_bounds(hidden).tolist()
        assert a == 0 and b == hidden and split % unit_parts.TILE == 0 and 0 < split < b
    assert not unit_parts.fits(np, np.float32, unit_parts.MIN_HIDDEN - 1, 16)
    assert not unit_parts.fits(np, np.float32, 256, unit_parts.MIN_BATCH - 1)
    assert not unit_parts.fits(np, np.float64, 256, 16)


@pytest.mark.parametrize("blocked", [False, True])
def test_an_lstm_training_step_takes_it_compiled_and_eager_alike(monkeypatch, blocked) -> None:
    assert_train_steps_agree(lstm_lockstep, "LSTM", monkeypatch, blocked)


def test_a_batch_of_whole_vectors_takes_the_tiles_compiled_and_eager_alike(monkeypatch) -> None:
    assert unit_tiles.width(LANES) == LANES
    assert_train_steps_agree(lstm_lockstep, "LSTM", monkeypatch, False, batch=LANES)


def test_the_tiles_bits_do_not_depend_on_what_runs_the_parts() -> None:
    ins = _inputs(5, 4, LANES, 100, 1.0)  # parts of 64 and 36 units
    first = forward_module.lstm_forward(*ins)
    with using_threads(1, blas_too=True):
        again = forward_module.lstm_forward(*ins)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    reference = _forward_reference(*ins)  # the tiles' products, part by part
    assert all(np.array_equal(a, b) for a, b in zip(first, reference))


@pytest.mark.parametrize(("n", "hidden"), [(LANES, 64), (2 * LANES, 256), (4 * LANES, 96)])
def test_the_rows_form_gives_the_feature_major_tiles_bits(monkeypatch, n, hidden) -> None:
    ins = _inputs(11, 5, n, hidden, 1.0)
    assert unit_tiles.rows_fit(n, unit_bounds(hidden))
    rows = forward_module.lstm_forward(*ins)
    monkeypatch.setattr(unit_tiles, "rows_fit", lambda n, bounds, vectors=1: False)
    tiles = forward_module.lstm_forward(*ins)  # the products feature-major, then transposed
    assert all(np.array_equal(a, b) for a, b in zip(rows, tiles))
    assert not unit_tiles.rows_fit(n, unit_bounds(100))  # parts of 64 and 36 units
    assert not unit_tiles.rows_fit(LANES + 1, unit_bounds(hidden))  # no whole vectors


@pytest.mark.parametrize("n", [LANES, 3 * LANES])
@pytest.mark.parametrize("present", [(True, False, False), (False, True, True), (True, True, True)])
def test_the_rows_forms_backward_gives_the_feature_major_bits(monkeypatch, n, present) -> None:
    steps, hidden = 5, 128
    assert unit_tiles.rows_fit(n, unit_bounds(hidden), vectors=2)
    ins = _inputs(13, steps, n, hidden, 1.0)
    _, cs, acts = forward_module.lstm_forward(*ins)
    shapes = ((steps, n, hidden), (steps, n, hidden), (steps, n, 4 * hidden))
    grads = drawn_gradients(13, shapes, present)
    saved = (acts, cs, ins[2], ins[3])
    rows = _backward(saved, grads, True, monkeypatch)
    monkeypatch.setattr(unit_tiles, "rows_fit", lambda n, bounds, vectors=1: False)
    feature_major = _backward(saved, grads, True, monkeypatch)
    assert all(np.array_equal(a, b) for a, b in zip(rows, feature_major))
