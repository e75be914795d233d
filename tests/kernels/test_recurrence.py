"""The LSTM/GRU backward recurrences' numba step equals the same arithmetic as array calls (the
path a device's arrays take) bit for bit, in float32 and float64, with any of the LSTM's
gradients absent; its float32 tanh is the tanh op's."""

from __future__ import annotations

import types

import numpy as np
import pytest

from dualflow.kernels.fast_math.fast_tanh import fresh_tanh
from dualflow.kernels.linalg.recurrence import gru_grad_recurrence, lstm_grad_recurrence
from dualflow.ops import OPS

# numpy under another name: the recurrences take their array-call path, not the numba step
AS_DEVICE = types.SimpleNamespace(
    ascontiguousarray=np.ascontiguousarray, empty=np.empty, zeros=np.zeros, matmul=np.matmul
)


def _inputs(rng: np.random.Generator, shapes: list, dtype: str) -> tuple:
    return tuple(rng.standard_normal(s).astype(dtype) for s in shapes)


def _tanh(xp: object, x: np.ndarray) -> np.ndarray:
    return OPS["tanh"].forward(np, x)  # the op's own: tanh_f32's bits in float32


def _saved(rng: np.random.Generator, sizes: tuple, dtype: str) -> tuple:
    steps, n, hidden = sizes
    acts = rng.uniform(0.05, 0.95, (steps, n, 4 * hidden)).astype(dtype)
    acts[..., 2 * hidden : 3 * hidden] *= 2.0
    acts[..., 2 * hidden : 3 * hidden] -= 1.0
    state = (steps, n, hidden)
    return acts, *_inputs(rng, [state, state[1:], (4 * hidden, hidden)], dtype)


GIVEN = [(True, True, True), (True, False, False), (False, True, False), (False, False, True)]


@pytest.mark.parametrize("given", GIVEN, ids=["all", "gh", "gc", "base"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lstm_step_kernel_equals_array_calls(dtype: str, given: tuple) -> None:
    # (N, H) = (3, 20): a 16-unit tile and a remainder in the transposes
    rng = np.random.default_rng(0)
    sizes = (5, 3, 20)
    saved = _saved(rng, sizes, dtype)
    state, gates = sizes, (*sizes[:2], 4 * sizes[2])
    grads = tuple(
        _inputs(rng, [s], dtype)[0] if g else None for s, g in zip((state, state, gates), given)
    )
    fused = lstm_grad_recurrence(np, saved, grads, np.dtype(dtype), _tanh)
    plain = lstm_grad_recurrence(AS_DEVICE, saved, grads, np.dtype(dtype), _tanh)
    for a, b in zip(fused, plain):
        assert a.dtype == dtype and np.array_equal(a, b)


def test_lstm_float32_step_inlines_the_tanh_ops_function() -> None:
    # the numba step's tanh(c) is tanh_f32, the tanh op's float32 loop: with every other
    # factor exact (o = 1, i = 0: dc = dh (1 - tanh(c)^2)), dc shows tanh's own bits
    sizes = (1, 2, 40)
    acts = np.zeros((1, 2, 160), np.float32)
    acts[..., 120:] = 1.0
    cs = np.linspace(-3, 3, 80, dtype=np.float32).reshape(sizes)
    gh = np.ones(sizes, np.float32)
    saved = (acts, cs, cs[0], np.zeros((160, 40), np.float32))
    _, _, dc = lstm_grad_recurrence(np, saved, (gh, None, None), np.dtype("float32"), _tanh)
    tc = fresh_tanh(cs)
    assert np.array_equal(dc, np.float32(1.0) - tc * tc)
    assert not np.array_equal(dc, np.float32(1.0) - np.tanh(cs) ** 2)  # another tanh's bits


@pytest.mark.parametrize("given", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gru_step_kernel_equals_array_calls(dtype: str, given: tuple) -> None:
    rng = np.random.default_rng(1)
    steps, n, hidden = 5, 3, 20
    gates = rng.uniform(0.05, 0.95, (steps, n, 3 * hidden)).astype(dtype)
    state = (steps, n, hidden)
    saved = (gates, *_inputs(rng, [state, state, state[1:], (3 * hidden, hidden)], dtype))
    grads = tuple(
        _inputs(rng, [s], dtype)[0] if g else None
        for s, g in zip((state, (steps, n, 3 * hidden)), given)
    )
    fused = gru_grad_recurrence(np, saved, grads, np.dtype(dtype))
    plain = gru_grad_recurrence(AS_DEVICE, saved, grads, np.dtype(dtype))
    for a, b in zip(fused, plain):
        assert a.dtype == dtype and np.array_equal(a, b)


def test_a_single_step_has_no_carry() -> None:
    # one step: dh = gh, dc = gc + gh * o (1 - tanh(c)^2), dg from dc and dh with no carry
    rng = np.random.default_rng(2)
    acts, cs, c0, w = _saved(rng, (1, 2, 3), "float64")
    gh, gc = _inputs(rng, [(1, 2, 3)] * 2, "float64")
    dg, dh, dc = lstm_grad_recurrence(np, (acts, cs, c0, w), (gh, gc, None), np.float64, _tanh)
    i, f, g, o = np.split(acts, 4, axis=-1)
    tc = np.tanh(cs)
    np.testing.assert_array_equal(dh, gh)
    np.testing.assert_allclose(dc, gc + gh * o * (1 - tc * tc))
    want = [
        dc * g * i * (1 - i),
        dc * c0 * f * (1 - f),
        dc * i * (1 - g * g),
        dh * tc * o * (1 - o),
    ]
    np.testing.assert_allclose(dg, np.concatenate(want, -1))
