"""The GRU forward's one-GEMM loop and numba cell step (``kernels/linalg/gru_forward.py``) give
the bits of the numpy cell it replaces (``gru_scan``'s array-call path) at any sizes, and leave
their inputs alone. The lockstep loop that takes larger layers (``gru_lockstep``) is switched
off here; ``test_gru_lockstep.py`` checks it."""

from __future__ import annotations

import numpy as np
import pytest

from dualflow.kernels.linalg import unit_parts
from dualflow.kernels.linalg.gru_forward import gru_forward
from dualflow.ops import recurrent_gru
from dualflow.ops.recurrent_gru import GRUScan
from tests.kernels.recurrent_cells import cell_cases, scaled_inputs


@pytest.fixture(autouse=True)
def _one_gemm_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(unit_parts, "fits", lambda xp, dtype, hidden, batch: False)


def _array_path(*ins: np.ndarray) -> tuple:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(recurrent_gru, "fits", lambda xp, dtype: False)
        return GRUScan.forward(np, *ins)


def _inputs(seed: int, steps: int, n: int, hidden: int, scale: float) -> tuple:
    shapes = [(steps, n, 3 * hidden), (n, hidden), (3 * hidden, hidden), (3 * hidden,)]
    return tuple(scaled_inputs(seed, shapes, hidden, scale, weight=2))


@cell_cases
def test_numba_cell_equals_the_array_calls_bit_for_bit(
    steps: int, n: int, hidden: int, scale: float, seed: int
) -> None:
    ins = _inputs(seed, steps, n, hidden, scale)
    plain = _array_path(*ins)
    fused = gru_forward(*ins)
    for a, b in zip(fused, plain):
        assert a.dtype == np.float32 and a.shape == b.shape and np.array_equal(a, b)


def test_the_op_takes_the_cell_and_leaves_inputs_alone() -> None:
    xw, h0, w, b = _inputs(3, 5, 17, 48, 2.0)
    h0, w = np.asfortranarray(h0), np.asfortranarray(w)  # h0.T is C-contiguous: not written
    before = [a.copy() for a in (xw, h0, w, b)]
    plain = _array_path(xw, h0, w, b)
    for a, c in zip(GRUScan.forward(np, xw, h0, w, b), plain):
        assert np.array_equal(a, c)
    for a, c in zip((xw, h0, w, b), before):
        assert np.array_equal(a, c)


def test_empty_sizes() -> None:
    for steps, n, hidden in ((0, 2, 3), (2, 0, 3), (2, 3, 0)):
        hs, gates, hn = gru_forward(*_inputs(0, steps, n, hidden, 1.0))
        assert hs.shape == hn.shape == (steps, n, hidden) and gates.shape == (steps, n, 3 * hidden)
