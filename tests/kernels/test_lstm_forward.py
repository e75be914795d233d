"""The LSTM forward's one-GEMM loop and numba cell step (``kernels/linalg/lstm_forward.py``) give
the bits of the numpy cell it replaces (``lstm_scan``'s array-call path, the ops'
``sigmoid``/``tanh``) at any sizes, including feature counts that are not a multiple of its
16-wide tiles, and leave their inputs alone. The lockstep loop that takes larger layers
(``lstm_lockstep``) is switched off here; ``test_lstm_lockstep.py`` checks it."""

from __future__ import annotations

import numpy as np
import pytest

from dualflow.kernels.linalg import unit_parts
from dualflow.kernels.linalg.lstm_forward import fits, lstm_forward
from dualflow.ops import recurrent
from dualflow.ops.recurrent import LSTMScan
from tests.kernels.recurrent_cells import cell_cases, scaled_inputs


def _array_path(monkeypatch: pytest.MonkeyPatch, *ins: np.ndarray) -> tuple:
    with monkeypatch.context() as patch:
        patch.setattr(recurrent, "fits", lambda xp, dtype: False)
        return LSTMScan.forward(np, *ins)


@pytest.fixture(autouse=True)
def _one_gemm_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(unit_parts, "fits", lambda xp, dtype, hidden, batch: False)


def _inputs(seed: int, steps: int, n: int, hidden: int, scale: float) -> tuple:
    shapes = [(steps, n, 4 * hidden), (n, hidden), (n, hidden), (4 * hidden, hidden)]
    return tuple(scaled_inputs(seed, shapes, hidden, scale, weight=3))


@cell_cases
def test_numba_cell_equals_the_array_calls_bit_for_bit(
    steps: int, n: int, hidden: int, scale: float, seed: int
) -> None:
    ins = _inputs(seed, steps, n, hidden, scale)
    with pytest.MonkeyPatch.context() as patch:
        plain = _array_path(patch, *ins)
    fused = lstm_forward(*ins)
    for a, b in zip(fused, plain):
        assert a.dtype == np.float32 and a.shape == b.shape and np.array_equal(a, b)


def test_the_op_takes_the_cell_for_float32_and_leaves_inputs_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    xw, h0, c0, w = _inputs(3, 5, 17, 48, 2.0)
    c0 = np.asfortranarray(c0)  # c0.T is C-contiguous: the kernel must not write through it
    h0 = np.asfortranarray(h0)
    w = np.asfortranarray(w)  # a GEMM operand's layout decides BLAS's summation order
    before = [a.copy() for a in (xw, h0, c0, w)]
    plain = _array_path(monkeypatch, xw, h0, c0, w)
    assert fits(np, np.float32)
    fused = LSTMScan.forward(np, xw, h0, c0, w)
    for a, b in zip(fused, plain):
        assert np.array_equal(a, b)
    for a, b in zip((xw, h0, c0, w), before):
        assert np.array_equal(a, b)


def test_other_dtypes_and_empty_sizes() -> None:
    assert not fits(np, np.float64) and not fits(np, np.float16)
    for steps, n, hidden in ((0, 2, 3), (2, 0, 3), (2, 3, 0)):
        hs, cs, gates = lstm_forward(*_inputs(0, steps, n, hidden, 1.0))
        assert hs.shape == cs.shape == (steps, n, hidden) and gates.shape == (steps, n, 4 * hidden)
