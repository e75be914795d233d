"""The LSTM/GRU backward recurrences' numba step equals the same arithmetic as array calls (the
path a device's arrays take) bit for bit, in float32 and float64."""

from __future__ import annotations

import types

import numpy as np
import pytest

from dualflow.kernels.linalg.recurrence import gru_grad_recurrence, lstm_grad_recurrence

# numpy under another name: the recurrences take their array-call path, not the numba step
AS_DEVICE = types.SimpleNamespace(
    ascontiguousarray=np.ascontiguousarray, empty=np.empty, zeros=np.zeros, matmul=np.matmul
)


def _inputs(rng: np.random.Generator, shapes: list, dtype: str) -> tuple:
    return tuple(rng.standard_normal(s).astype(dtype) for s in shapes)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lstm_step_kernel_equals_array_calls(dtype: str) -> None:
    steps, n, hidden = 5, 3, 4
    state, gates, three = (steps, n, hidden), (steps, n, 4 * hidden), (steps, n, 3 * hidden)
    shapes = [state, state, gates, three, state, state, state, (4 * hidden, hidden)]
    ins = _inputs(np.random.default_rng(0), shapes, dtype)
    fused = lstm_grad_recurrence(np, ins, np.dtype(dtype))
    plain = lstm_grad_recurrence(AS_DEVICE, ins, np.dtype(dtype))
    for a, b in zip(fused, plain):
        assert a.dtype == dtype and np.array_equal(a, b)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gru_step_kernel_equals_array_calls(dtype: str) -> None:
    steps, n, hidden = 5, 3, 4
    state, gates = (steps, n, hidden), (steps, n, 3 * hidden)
    shapes = [state, gates, gates, state, (3 * hidden, hidden)]
    ins = _inputs(np.random.default_rng(1), shapes, dtype)
    fused = gru_grad_recurrence(np, ins, np.dtype(dtype))
    plain = gru_grad_recurrence(AS_DEVICE, ins, np.dtype(dtype))
    for a, b in zip(fused, plain):
        assert a.dtype == dtype and np.array_equal(a, b)


def test_a_single_step_has_no_carry() -> None:
    # one step: dh = gh, dc = gc + gh * k, dg = [dc * p, dh * q] + base
    ins = _inputs(np.random.default_rng(2), [(1, 2, 3)] * 2 + [(1, 2, 12), (1, 2, 9)]
                  + [(1, 2, 3)] * 3 + [(12, 3)], "float64")  # fmt: skip
    gh, gc, base, p, q, k, _, _ = ins
    dg, dh, dc = lstm_grad_recurrence(np, ins, np.dtype("float64"))
    np.testing.assert_array_equal(dh, gh)
    np.testing.assert_allclose(dc, gc + gh * k)
    np.testing.assert_allclose(dg, np.concatenate([np.tile(dc, 3) * p, dh * q], -1) + base)
