"""Op-table entries for lstm_scan (its three outputs, against a plain numpy loop of LSTM steps)
and lstm_scan_grad (its backward recurrence, against a numpy loop of its steps)."""

from __future__ import annotations

import numpy as np

from dualflow import ops
from tests.opinfo import OpInfo, Sample


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _lstm_ref(xw, h0, c0, w_hh) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    h, c, hs, cs, acts = h0, c0, [], [], []
    for x_t in xw:
        i, f, g, o = np.split(x_t + h @ w_hh.T, 4, axis=-1)
        i, f, g, o = _sigmoid(i), _sigmoid(f), np.tanh(g), _sigmoid(o)
        c = f * c + i * g
        h = o * np.tanh(c)
        hs.append(h)
        cs.append(c)
        acts.append(np.concatenate([i, f, g, o], axis=-1))
    return np.stack(hs), np.stack(cs), np.stack(acts)


def _lstm_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for steps, n, hidden in [(3, 2, 2), (1, 1, 3), (4, 3, 1)]:
        xw = rng.normal(size=(steps, n, 4 * hidden))
        h0, c0 = rng.normal(size=(n, hidden)), rng.normal(size=(n, hidden))
        w_hh = rng.normal(scale=0.5, size=(4 * hidden, hidden))
        out.append(Sample((xw, h0, c0, w_hh), name=f"L{steps}xN{n}xH{hidden}"))
    return out


def _grad_ref(gh, gc, base, p, q, k, f, w) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    steps, n, hidden = gh.shape
    dg, dh, dc = np.zeros_like(base), np.zeros_like(gh), np.zeros_like(gc)
    carry_h, carry_c = np.zeros((n, hidden)), np.zeros((n, hidden))
    for t in reversed(range(steps)):
        dh[t] = gh[t] + carry_h
        dc[t] = gc[t] + carry_c + dh[t] * k[t]
        dg[t] = np.tile(dc[t], 4) * p[t] + np.tile(dh[t], 4) * q[t] + base[t]
        carry_h, carry_c = dg[t] @ w, dc[t] * f[t]
    return dg, dh, dc


def _grad_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for steps, n, hidden in [(3, 2, 2), (1, 1, 3), (4, 3, 1)]:
        state, gates = (steps, n, hidden), (steps, n, 4 * hidden)
        arrays = [rng.normal(size=s) for s in (state, state, gates, gates, gates, state)]
        f = rng.uniform(0.1, 0.9, size=state)
        w = rng.normal(scale=0.5, size=(4 * hidden, hidden))
        out.append(Sample((*arrays, f, w), name=f"L{steps}xN{n}xH{hidden}"))
    return out


ENTRIES = [
    OpInfo(
        "lstm_scan",
        ops.lstm_scan,
        _lstm_ref,
        _lstm_samples,
        f32_tol=(1e-5, 1e-5),
        grad_tol=(1e-4, 1e-6),
    ),
    OpInfo(
        "lstm_scan_grad",
        ops.lstm_scan_grad,
        _grad_ref,
        _grad_samples,
        f32_tol=(1e-5, 1e-5),
        grad_tol=(1e-4, 1e-6),
    ),
]
