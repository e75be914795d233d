"""The LSTM and GRU backward recurrences on host arrays: one numba step for the elementwise
part and one BLAS GEMM per step into a preallocated buffer (``ops.lstm_scan_grad``'s and
``ops.gru_scan_grad``'s forwards).

Written with numpy, a step of the dh/dc recurrence is ~10 calls on (N, H) and (N, 4H) arrays,
each allocating its result; one fused loop reads every operand once and writes dh, dc, the
step's gate gradients and the carry to the next step in place. Each step also computes its
elementwise factors from the forward's saved gates and states (no whole-sequence coefficient
arrays, and absent gradients are not zeros: numba types a kernel without them). Arrays other
than numpy float32 / float64 (cupy's) take the same arithmetic as array-module calls.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from dualflow.kernels.base.cpu_threads import blas_spinning
from dualflow.kernels.linalg import grad_steps, gru_lockstep, lstm_lockstep, unit_parts
from dualflow.kernels.linalg.grad_steps import gru_grad_part, lstm_grad_part

_KERNELS: dict[str, Any] = {}


def _step(acts, c, c_prev, gh, gc, base, tc, carry_ht, carry_c, dg, dh, dc):
    # one whole step (every unit) of lstm_grad_part: the one-GEMM loop's kernel
    lstm_grad_part(acts, c, c_prev, gh, gc, base, tc, carry_ht, carry_c, dg, dh, dc, 0,
                   dh.shape[1])  # fmt: skip


def _xp_step(xp: Any, acts, c, c_prev, gh, gc, base, tc, carry_ht, carry_c, dg, dh, dc) -> None:
    # the same arithmetic in the same order, as array-module calls (a device's arrays)
    hidden = dh.shape[1]
    i, f, g, o = (acts[:, m * hidden : (m + 1) * hidden] for m in range(4))
    dh[...] = carry_ht.T if gh is None else gh + carry_ht.T
    dc[...] = (carry_c if gc is None else gc + carry_c) + dh * (o * (1.0 - tc * tc))
    carry_c[...] = dc * f
    blocks = (dc * (g * i * (1.0 - i)), dc * (c_prev * f * (1.0 - f)), dc * (i * (1.0 - g * g)))
    for m, block in enumerate((*blocks, dh * (tc * o * (1.0 - o)))):
        part = slice(m * hidden, (m + 1) * hidden)
        dg[:, part] = block if base is None else base[:, part] + block


def _numba(py_func: Any, stem: str) -> Any:
    kernel = _KERNELS.get(stem)
    if kernel is not None:
        return kernel
    from dualflow.kernels.base import numba_cache  # noqa: PLC0415 - numba, when first used

    def build() -> tuple[Any, str]:  # once, whichever threads ask first
        return numba.njit(nogil=True, cache=False, error_model="numpy")(py_func), stem

    return numba_cache.built_once(_KERNELS, stem, build)


@functools.cache
def _lstm_stem() -> str:
    return f"k_lstm_grad_step_{grad_steps.FINGERPRINT}"


def lstm_step_kernel() -> Any:
    """The LSTM backward's numba step, compiled once a process through the kernels cache; its
    stem names everything it inlines (``grad_steps.FINGERPRINT``: the cache key hashes
    ``_step``'s own bytecode only, so a change to any of them is a new kernel).

    Example:
        >>> lstm_step_kernel() is lstm_step_kernel()
        True
    """
    return _numba(_step, _lstm_stem())


def fused(xp: Any, dtype: Any) -> bool:
    """Whether the recurrences run their numba steps (numpy float32/float64 arrays); others
    take the same arithmetic as array calls.

    Example:
        >>> fused(np, np.dtype("float32")), fused(np, np.dtype("int64"))
        (True, False)
    """
    return xp is np and np.dtype(dtype) in (np.float32, np.float64)


def lstm_grad_recurrence(
    xp: Any, saved: tuple, grads: tuple, dtype: Any, tanh: Callable
) -> tuple[Any, Any, Any]:
    """An LSTM layer's backward recurrence from its forward's saved arrays, last step first.

    ``saved`` is ``(acts, cs, c0, w)``: the activated gates [σi, σf, tanh g, σo] (L, N, 4H),
    the cell states (L, N, H), the first cell state (N, H) and ``weight_hh`` (4H, H); ``grads``
    is ``(gh, gc, base)``, the gradients reaching each step's h and c (L, N, H) and the gate
    gradients needing no recurrence (L, N, 4H), each None when absent (no zeros are made).
    ``tanh`` is the ``tanh`` op's forward ``tanh(xp, x)`` (float32 numpy inlines ``tanh_f32``,
    the same function). Step t, with ``tc = tanh(c_t)`` and ``c_prev`` the step's first c:
    ``dh_t = gh_t + dg_{t+1} @ w``, ``dc_t = gc_t + dc_{t+1} f_{t+1} + dh_t o (1 - tc²)``,
    ``dg_t = [dc_t g i (1 - i), dc_t c_prev f (1 - f), dc_t i (1 - g²), dh_t tc o (1 - o)] +
    base_t``; returns ``(dg, dh, dc)``.

    Example:
        >>> acts, cs = np.full((2, 1, 4), 0.5), np.zeros((2, 1, 1))
        >>> dg, dh, dc = lstm_grad_recurrence(np, (acts, cs, cs[0], np.ones((4, 1))),
        ...     (np.ones((2, 1, 1)), None, None), np.float64, lambda xp, x: np.tanh(x))
        >>> dh[:, 0, 0].tolist(), dc[:, 0, 0].tolist()
        ([1.25, 1.0], [0.875, 0.5])
    """
    acts, cs, c0, w = (xp.ascontiguousarray(a, dtype=dtype) for a in saved)
    gh, gc, base = (None if a is None else xp.ascontiguousarray(a, dtype=dtype) for a in grads)
    steps, n, hidden = cs.shape
    dg = xp.empty((steps, n, 4 * hidden), dtype)
    dh, dc = xp.empty((steps, n, hidden), dtype), xp.empty((steps, n, hidden), dtype)
    if unit_parts.fits(xp, dtype, hidden, n):  # each half of the units on its own thread
        lstm_lockstep.lstm_grad_lockstep((acts, cs, c0, w), (gh, gc, base), (dg, dh, dc))
        return dg, dh, dc
    wt = xp.ascontiguousarray(w.T)
    carry_ht, carry_c = xp.zeros((hidden, n), dtype), xp.zeros((n, hidden), dtype)
    numba_step = fused(xp, dtype) and n * hidden > 0
    step = lstm_step_kernel() if numba_step else functools.partial(_xp_step, xp)
    inline_tanh = numba_step and np.dtype(dtype) == np.float32
    with _spinning(xp):
        for t in reversed(range(steps)):
            tc = None if inline_tanh else tanh(xp, cs[t])  # float64: the op's tanh, per step
            per_step = (a if a is None else a[t] for a in (gh, gc, base))
            step(acts[t], cs[t], cs[t - 1] if t else c0, *per_step, tc, carry_ht, carry_c,
                 dg[t], dh[t], dc[t])  # fmt: skip
            if t:
                carry(xp, wt, dg[t], carry_ht)
    return dg, dh, dc


def _spinning(xp: Any) -> contextlib.AbstractContextManager:
    """OpenBLAS's threads awake between the steps' carries (``cpu_threads.blas_spinning``);
    nothing for another array module."""
    return blas_spinning() if xp is np else contextlib.nullcontext()


def carry(xp: Any, wt: Any, dg: Any, out: Any) -> None:
    """``out = (dg @ w)^T``, the next step's carry, as ``w^T @ dg^T`` (``wt`` is ``w^T``
    C-ordered, ``dg`` one step's (N, G) gate gradients, ``out`` (H, N)).

    ``dg @ w`` has N rows (the batch, 16 in the bench's LM), too few for OpenBLAS to split over
    its threads; the transposed product has H rows and splits (64 steps' carries on two
    threads: 4.5-12.6 ms against 15-23 ms, the same bits here). Each element is the same dot
    product over G either way.

    Example:
        >>> w, dg = np.arange(6.0).reshape(3, 2), np.ones((1, 3))
        >>> out = np.empty((2, 1)); carry(np, np.ascontiguousarray(w.T), dg, out)
        >>> out[:, 0].tolist() == (dg @ w)[0].tolist()
        True
    """
    xp.matmul(wt, dg.T, out=out)


def _gru_step(gates, hn, h_prev, gh, base, carry_ht, carry_z, dg, dh):
    # one whole step (every unit) of gru_grad_part: the one-GEMM loop's kernel
    gru_grad_part(gates, hn, h_prev, gh, base, carry_ht, carry_z, dg, dh, 0, dh.shape[1])


def _gru_xp_step(xp: Any, gates, hn, h_prev, gh, base, carry_ht, carry_z, dg, dh) -> None:
    # the same arithmetic in the same order, as array-module calls (a device's arrays)
    hidden = dh.shape[1]
    rr, z, g = (gates[:, m * hidden : (m + 1) * hidden] for m in range(3))
    dh[...] = (carry_ht.T if gh is None else gh + carry_ht.T) + carry_z
    carry_z[...] = dh * z
    per_n = (1.0 - z) * (1.0 - g * g)
    blocks = (dh * (per_n * hn * (rr * (1.0 - rr))), dh * ((h_prev - g) * (z * (1.0 - z))))
    for m, block in enumerate((*blocks, dh * (per_n * rr))):
        part = slice(m * hidden, (m + 1) * hidden)
        dg[:, part] = block if base is None else base[:, part] + block


@functools.cache
def _gru_stem() -> str:
    return f"k_gru_grad_step_{grad_steps.FINGERPRINT}"


def gru_grad_recurrence(xp: Any, saved: tuple, grads: tuple, dtype: Any) -> tuple[Any, Any]:
    """A GRU layer's backward recurrence from its forward's saved arrays, last step first.

    ``saved`` is ``(gates, hn, hs, h0, w)``: the gates [r, z, n] (L, N, 3H), the n gate's
    hidden projections ``W_hn h + b_hn`` and the hidden states (L, N, H), the first hidden
    state (N, H) and ``weight_hh`` (3H, H); ``grads`` is ``(gh, base)``, the gradients reaching
    each step's h (L, N, H) and the part of the hidden projection's gradient that needs no
    recurrence (L, N, 3H), each None when absent (no zeros are made). Step t, with ``h_prev``
    the step's first h and ``per_n = (1 - z)(1 - n²)``: ``dh_t = gh_t + dg_{t+1} @ w + dh_{t+1}
    z_{t+1}``, ``dg_t = [dh_t per_n hn r (1 - r), dh_t (h_prev - n) z (1 - z), dh_t per_n r] +
    base_t``; returns ``(dg, dh)``.

    Example:
        >>> gates, hn = np.full((2, 1, 3), 0.5), np.ones((2, 1, 1))
        >>> dg, dh = gru_grad_recurrence(np, (gates, hn, hn, hn[0], np.ones((3, 1))),
        ...     (np.ones((2, 1, 1)), None), np.float64)
        >>> dh[:, 0, 0].tolist()
        [1.90625, 1.0]
    """
    gates, hn, hs, h0, w = (xp.ascontiguousarray(a, dtype=dtype) for a in saved)
    gh, base = (None if a is None else xp.ascontiguousarray(a, dtype=dtype) for a in grads)
    steps, n, hidden = hs.shape
    dg, dh = xp.empty((steps, n, 3 * hidden), dtype), xp.empty((steps, n, hidden), dtype)
    if unit_parts.fits(xp, dtype, hidden, n):  # each half of the units on its own thread
        gru_lockstep.gru_grad_lockstep((gates, hn, hs, h0, w), (gh, base), (dg, dh))
        return dg, dh
    wt = xp.ascontiguousarray(w.T)
    carry_ht, carry_z = xp.zeros((hidden, n), dtype), xp.zeros((n, hidden), dtype)
    numba_step = fused(xp, dtype) and n * hidden > 0
    step = _numba(_gru_step, _gru_stem()) if numba_step else functools.partial(_gru_xp_step, xp)
    with _spinning(xp):
        for t in reversed(range(steps)):
            per_step = (a if a is None else a[t] for a in (gh, base))
            step(gates[t], hn[t], hs[t - 1] if t else h0, *per_step, carry_ht, carry_z, dg[t],
                 dh[t])  # fmt: skip
            if t:
                carry(xp, wt, dg[t], carry_ht)
    return dg, dh
