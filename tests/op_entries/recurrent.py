"""Op-table entries for lstm_scan and gru_scan (their three outputs, against plain numpy loops of
LSTM and GRU steps) and their backward recurrences lstm_scan_grad and gru_scan_grad (against
numpy loops of their steps, with the factors as lstm_scan's and gru_scan's backwards computed
them on whole sequences before the grad ops took the forward's saved arrays)."""

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


def _factors(acts, cs, c0) -> tuple:
    # the backward's per-step coefficients, as lstm_scan's backward computed them on whole
    # sequences before lstm_scan_grad took its saved arrays
    i, f, g, o = np.split(acts, 4, axis=-1)
    c_prev, tc = np.concatenate([c0[None], cs[:-1]]), np.tanh(cs)
    p = np.concatenate([g * i * (1 - i), c_prev * f * (1 - f), i * (1 - g * g)], -1)
    return p, tc * o * (1 - o), o * (1 - tc * tc), f


def _grad_ref(acts, cs, c0, w, gh=None, gc=None, base=None) -> tuple:
    steps, n, hidden = cs.shape
    p, q, k, f = _factors(acts, cs, c0)
    gh, gc = (np.zeros_like(cs) if a is None else a for a in (gh, gc))
    base = np.zeros_like(acts) if base is None else base
    dg, dh, dc = np.zeros_like(acts), np.zeros_like(cs), np.zeros_like(cs)
    carry_h, carry_c = np.zeros((n, hidden)), np.zeros((n, hidden))
    for t in reversed(range(steps)):
        dh[t] = gh[t] + carry_h
        dc[t] = gc[t] + carry_c + dh[t] * k[t]
        dg[t] = np.concatenate([np.tile(dc[t], 3) * p[t], dh[t] * q[t]], -1) + base[t]
        carry_h, carry_c = dg[t] @ w, dc[t] * f[t]
    return dg, dh, dc


def _saved(rng: np.random.Generator, steps: int, n: int, hidden: int) -> tuple:
    # a forward's saved arrays: sigmoid gates in (0, 1), tanh g in (-1, 1)
    acts = rng.uniform(0.05, 0.95, size=(steps, n, 4 * hidden))
    acts[..., 2 * hidden : 3 * hidden] = rng.uniform(-0.95, 0.95, size=(steps, n, hidden))
    cs, c0 = rng.normal(size=(steps, n, hidden)), rng.normal(size=(n, hidden))
    return acts, cs, c0, rng.normal(scale=0.5, size=(4 * hidden, hidden))


def _grad_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for steps, n, hidden, given in [(3, 2, 2, 3), (1, 1, 3, 1), (4, 3, 1, 3), (3, 2, 2, 1)]:
        state, gates = (steps, n, hidden), (steps, n, 4 * hidden)
        grads = [rng.normal(size=s) for s in (state, state, gates)][:given]
        name = f"L{steps}xN{n}xH{hidden}-{'gh' if given == 1 else 'gh,gc,base'}"
        out.append(Sample((*_saved(rng, steps, n, hidden), *grads), name=name))
    return out


def _gru_ref(xw, h0, w_hh, b_hh) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    h, hs, gates, hns = h0, [], [], []
    for x_t in xw:
        x_r, x_z, x_n = np.split(x_t, 3, axis=-1)
        h_r, h_z, h_n = np.split(h @ w_hh.T + b_hh, 3, axis=-1)
        r, z = _sigmoid(x_r + h_r), _sigmoid(x_z + h_z)
        n = np.tanh(x_n + r * h_n)
        h = n + z * (h - n)
        hs.append(h)
        gates.append(np.concatenate([r, z, n], axis=-1))
        hns.append(h_n)
    return np.stack(hs), np.stack(gates), np.stack(hns)


def _gru_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for steps, n, hidden in [(3, 2, 2), (1, 1, 3), (4, 3, 1)]:
        xw = rng.normal(size=(steps, n, 3 * hidden))
        h0 = rng.normal(size=(n, hidden))
        w_hh = rng.normal(scale=0.5, size=(3 * hidden, hidden))
        b_hh = rng.normal(scale=0.5, size=3 * hidden)
        out.append(Sample((xw, h0, w_hh, b_hh), name=f"L{steps}xN{n}xH{hidden}"))
    return out


def _gru_grad_ref(gates, hn, hs, h0, w, gh=None, base=None) -> tuple:
    # the factors as gru_scan's backward computed them on whole sequences, then the recurrence
    steps, n, hidden = hs.shape
    r, z, g_n = np.split(gates, 3, axis=-1)
    h_prev, per_n = np.concatenate([h0[None], hs[:-1]]), (1 - z) * (1 - g_n * g_n)
    q = np.concatenate([per_n * hn * r * (1 - r), (h_prev - g_n) * z * (1 - z), per_n * r], -1)
    gh = np.zeros_like(hs) if gh is None else gh
    base = np.zeros_like(gates) if base is None else base
    dg, dh = np.zeros_like(gates), np.zeros_like(hs)
    carry = np.zeros((n, hidden))
    for t in reversed(range(steps)):
        dh[t] = gh[t] + carry
        dg[t] = np.tile(dh[t], 3) * q[t] + base[t]
        carry = dg[t] @ w + dh[t] * z[t]
    return dg, dh


def _gru_saved(rng: np.random.Generator, steps: int, n: int, hidden: int) -> tuple:
    # a forward's saved arrays: sigmoid gates r, z in (0, 1), tanh n in (-1, 1)
    gates = rng.uniform(0.05, 0.95, size=(steps, n, 3 * hidden))
    gates[..., 2 * hidden :] = rng.uniform(-0.95, 0.95, size=(steps, n, hidden))
    hn, hs = rng.normal(size=(steps, n, hidden)), rng.normal(size=(steps, n, hidden))
    h0, w = rng.normal(size=(n, hidden)), rng.normal(scale=0.5, size=(3 * hidden, hidden))
    return gates, hn, hs, h0, w


def _gru_grad_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for steps, n, hidden, given in [(3, 2, 2, 2), (1, 1, 3, 1), (4, 3, 1, 2), (3, 2, 2, 1)]:
        grads = [rng.normal(size=(steps, n, k * hidden)) for k in (1, 3)][:given]
        name = f"L{steps}xN{n}xH{hidden}-{'gh' if given == 1 else 'gh,base'}"
        out.append(Sample((*_gru_saved(rng, steps, n, hidden), *grads), name=name))
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
    OpInfo(
        "gru_scan",
        ops.gru_scan,
        _gru_ref,
        _gru_samples,
        f32_tol=(1e-5, 1e-5),
        grad_tol=(1e-4, 1e-6),
    ),
    OpInfo(
        "gru_scan_grad",
        ops.gru_scan_grad,
        _gru_grad_ref,
        _gru_grad_samples,
        f32_tol=(1e-5, 1e-5),
        grad_tol=(1e-4, 1e-6),
    ),
]
