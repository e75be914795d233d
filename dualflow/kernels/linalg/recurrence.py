"""The LSTM and GRU backward recurrences on host arrays: one numba step for the elementwise
part and one BLAS GEMM per step into a preallocated buffer (``ops.lstm_scan_grad``'s and
``ops.gru_scan_grad``'s forwards).

Written with numpy, a step of the dh/dc recurrence is ~10 calls on (N, H) and (N, 4H) arrays,
each allocating its result; one fused loop reads every operand once and writes dh, dc, the
step's gate gradients and the carry to the next step in place. Arrays other than numpy float32
/ float64 (cupy's) take the same arithmetic as array-module calls.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from dualflow.kernels.base.cpu_threads import blas_spinning
from dualflow.kernels.linalg import tiles
from dualflow.kernels.linalg.tiles import sum_to_rows

_KERNELS: dict[str, Any] = {}


def _step(gh, gc, base, p, q, k, f, carry_ht, carry_c, dg, dh, dc):
    # one step: dh = gh + carry_h; dc = gc + carry_c + dh*k; dg = [dc*p (the i, f, g blocks),
    # dh*q (o)] + base; the next step's carry_c = dc*f (carry_h is dg @ W, a GEMM, read from
    # its transpose carry_ht). Loops over contiguous rows: they vectorize (a (row, unit, block)
    # nest did not, ~3x slower)
    n, hidden = dh.shape
    gcf, kf, ff = gc.reshape(-1), k.reshape(-1), f.reshape(-1)
    ccf, dhf, dcf = carry_c.reshape(-1), dh.reshape(-1), dc.reshape(-1)
    sum_to_rows(gh, carry_ht, dh)  # dh = gh + carry_h, in 16-unit tiles
    for i in range(n * hidden):
        c = gcf[i] + ccf[i] + dhf[i] * kf[i]
        dcf[i] = c
        ccf[i] = c * ff[i]
    dgf, pf, qf, bf = dg.reshape(-1), p.reshape(-1), q.reshape(-1), base.reshape(-1)
    for r in range(n):
        s = r * hidden
        for block in range(3):
            o, po = (4 * r + block) * hidden, (3 * r + block) * hidden
            for j in range(hidden):
                dgf[o + j] = dcf[s + j] * pf[po + j] + bf[o + j]
        o = (4 * r + 3) * hidden
        for j in range(hidden):
            dgf[o + j] = dhf[s + j] * qf[s + j] + bf[o + j]


def _xp_step(xp: Any, gh, gc, base, p, q, k, f, carry_ht, carry_c, dg, dh, dc) -> None:
    # the same arithmetic in the same order, as array-module calls (a device's arrays)
    n, hidden = dh.shape
    dh[...] = gh + carry_ht.T
    dc[...] = gc + carry_c + dh * k
    dg4, base4 = dg.reshape(n, 4, hidden), base.reshape(n, 4, hidden)
    dg4[:, :3] = dc[:, None, :] * p.reshape(n, 3, hidden) + base4[:, :3]
    dg4[:, 3] = dh * q + base4[:, 3]
    carry_c[...] = dc * f


def _numba(py_func: Any, stem: str) -> Any:
    kernel = _KERNELS.get(stem)
    if kernel is None:
        from dualflow.kernels.base import numba_cache  # noqa: PLC0415 - numba, when first used

        kernel = _KERNELS[stem] = numba_cache.cached_njit(py_func, stem)
    return kernel


def lstm_grad_recurrence(xp: Any, ins: tuple, dtype: Any) -> tuple[Any, Any, Any]:
    """The dh/dc recurrence of an LSTM's backward, from the last step to the first.

    ``ins`` is ``(gh, gc, base, p, q, k, f, w)``: (L, N, H), (L, N, H), (L, N, 4H), (L, N, 3H),
    (L, N, H), (L, N, H), (L, N, H) and (4H, H). Step t computes ``dh_t = gh_t + dg_{t+1} @ w``,
    ``dc_t = gc_t + dc_{t+1} f_{t+1} + dh_t k_t`` and ``dg_t = [dc_t p_t, dh_t q_t] + base_t``
    (``dc_t`` times each of p's three H-blocks, gates i, f, g; ``dh_t q_t`` the o gate's);
    returns ``(dg, dh, dc)``.

    Example:
        >>> ones = np.ones((2, 1, 1))
        >>> dg, dh, dc = lstm_grad_recurrence(np, (ones, ones, np.zeros((2, 1, 4)),
        ...     np.ones((2, 1, 3)), 0 * ones, ones, ones, np.ones((4, 1))), np.float64)
        >>> dh[:, 0, 0].tolist(), dc[:, 0, 0].tolist()
        ([7.0, 1.0], [10.0, 2.0])
    """
    gh, gc, base, p, q, k, f, w = (xp.ascontiguousarray(a, dtype=dtype) for a in ins)
    steps, n, hidden = gh.shape
    dg = xp.empty((steps, n, 4 * hidden), dtype)
    dh, dc = xp.empty((steps, n, hidden), dtype), xp.empty((steps, n, hidden), dtype)
    carry_ht, carry_c = xp.zeros((hidden, n), dtype), xp.zeros((n, hidden), dtype)
    wt = xp.ascontiguousarray(w.T)
    fused = xp is np and dtype in (np.float32, np.float64) and n * hidden > 0
    step = _numba(_step, f"k_lstm_grad_step_{tiles.FINGERPRINT}") if fused else None
    with _spinning(xp):
        for t in reversed(range(steps)):
            operands = (gh[t], gc[t], base[t], p[t], q[t], k[t], f[t], carry_ht, carry_c)
            if fused:
                step(*operands, dg[t], dh[t], dc[t])
            else:
                _xp_step(xp, *operands, dg[t], dh[t], dc[t])
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


def _gru_step(gh, q, base, z, carry_ht, carry_z, dg, dh):
    # one step: dh = gh + carry_h + carry_z; dg = dh*q + base (each of the three gate blocks);
    # the next step's carry_z = dh*z (carry_h is dg @ W, a GEMM, read from its transpose
    # carry_ht); loops over contiguous rows, as _step
    n, hidden = dh.shape
    czf, zf, dhf = carry_z.reshape(-1), z.reshape(-1), dh.reshape(-1)
    sum_to_rows(gh, carry_ht, dh)  # gh + carry_h, in 16-unit tiles; then + carry_z
    for i in range(n * hidden):
        h = dhf[i] + czf[i]
        dhf[i] = h
        czf[i] = h * zf[i]
    dgf, qf, bf = dg.reshape(-1), q.reshape(-1), base.reshape(-1)
    for r in range(n):
        for block in range(3):
            o, s = (3 * r + block) * hidden, r * hidden
            for j in range(hidden):
                dgf[o + j] = dhf[s + j] * qf[o + j] + bf[o + j]


def _gru_xp_step(xp: Any, gh, q, base, z, carry_ht, carry_z, dg, dh) -> None:
    n, hidden = dh.shape
    dh[...] = gh + carry_ht.T + carry_z
    dg[...] = (dh[:, None, :] * q.reshape(n, 3, hidden) + base.reshape(n, 3, hidden)).reshape(
        n, 3 * hidden
    )
    carry_z[...] = dh * z


def gru_grad_recurrence(xp: Any, ins: tuple, dtype: Any) -> tuple[Any, Any]:
    """The dh recurrence of a GRU's backward, from the last step to the first.

    ``ins`` is ``(gh, q, base, z, w)``: (L, N, H), (L, N, 3H), (L, N, 3H), (L, N, H) and
    (3H, H). Step t computes ``dh_t = gh_t + dg_{t+1} @ w + dh_{t+1} z_{t+1}`` and
    ``dg_t = dh_t q_t + base_t`` (``dh_t`` times each of the three H-blocks); returns
    ``(dg, dh)``.

    Example:
        >>> ones = np.ones((2, 1, 1))
        >>> dg, dh = gru_grad_recurrence(np, (ones, np.ones((2, 1, 3)), np.zeros((2, 1, 3)),
        ...     ones, np.ones((3, 1))), np.float64)
        >>> dh[:, 0, 0].tolist()
        [5.0, 1.0]
    """
    gh, q, base, z, w = (xp.ascontiguousarray(a, dtype=dtype) for a in ins)
    steps, n, hidden = gh.shape
    dg, dh = xp.empty((steps, n, 3 * hidden), dtype), xp.empty((steps, n, hidden), dtype)
    carry_ht, carry_z = xp.zeros((hidden, n), dtype), xp.zeros((n, hidden), dtype)
    wt = xp.ascontiguousarray(w.T)
    fused = xp is np and dtype in (np.float32, np.float64) and n * hidden > 0
    step = _numba(_gru_step, f"k_gru_grad_step_{tiles.FINGERPRINT}") if fused else None
    with _spinning(xp):
        for t in reversed(range(steps)):
            operands = (gh[t], q[t], base[t], z[t], carry_ht, carry_z)
            if fused:
                step(*operands, dg[t], dh[t])
            else:
                _gru_xp_step(xp, *operands, dg[t], dh[t])
            if t:
                carry(xp, wt, dg[t], carry_ht)
    return dg, dh
