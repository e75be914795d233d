"""The elementwise part of the recurrences' backward steps, as numba functions the step kernels
inline (``recurrence``'s one-GEMM loops and ``lstm_lockstep``'s and ``gru_lockstep``'s split
ones), with the typing-time helpers that let an absent gradient be None instead of zeros.
"""

from __future__ import annotations

import hashlib
import inspect
from typing import Any

import numba
import numpy as np
from numba import types
from numba.extending import overload

from dualflow.kernels.fast_math.fast_tanh import FINGERPRINT as TANH_FINGERPRINT
from dualflow.kernels.fast_math.fast_tanh import tanh_f32
from dualflow.kernels.fast_math.scalars import fingerprint
from dualflow.kernels.linalg import tiles
from dualflow.kernels.linalg.tiles import sum_to_rows, to_rows

ONE = np.float32(1.0)
"""The factors' 1, float32: exact, and it keeps float32 arithmetic float32 in numba."""


def add_or(a, v, j):
    """``a[j] + v``, or ``v`` where ``a`` is None (an absent gradient: no zeros read); numba
    picks the form when it types a kernel (``_add_or``), so a step has no per-element branch.

    Example:
        >>> add_or(None, 2.0, 0), float(add_or(np.ones(1), 2.0, 0))
        (2.0, 3.0)
    """
    return v if a is None else a[j] + v


@overload(add_or, inline="always")
def _add_or(a, v, j):
    if isinstance(a, types.NoneType):
        return lambda a, v, j: v
    return lambda a, v, j: a[j] + v


def tanh_at(tc, x, j):
    """``tc[j]`` (tanh(c) the caller computed, float64), or ``tanh_f32(x)`` where ``tc`` is
    None (float32: the ``tanh`` op's own float32 function, inlined).

    Example:
        >>> from dualflow.kernels.fast_math.fast_tanh import fresh_tanh
        >>> x = np.array([0.5], np.float32)
        >>> tanh_at(None, x[0], 0) == fresh_tanh(x)[0], tanh_at(x, 0.0, 0)
        (np.True_, np.float32(0.5))
    """
    return tanh_f32(x) if tc is None else tc[j]


@overload(tanh_at, inline="always")
def _tanh_at(tc, x, j):
    if isinstance(tc, types.NoneType):
        return lambda tc, x, j: tanh_f32(x)
    return lambda tc, x, j: tc[j]


def piece(a, r, lo, hi):
    """``a[r, lo:hi]``, or None where ``a`` is None (``_piece`` picks the form at typing): the
    steps index each operand's row piece from 0, which is what lets their loops vectorize
    (indexing whole 2-D rows ran ~8x slower).

    Example:
        >>> piece(None, 0, 0, 1), piece(np.arange(6).reshape(2, 3), 1, 1, 3).tolist()
        (None, [4, 5])
    """
    return None if a is None else a[r, lo:hi]


@overload(piece, inline="always")
def _piece(a, r, lo, hi):
    if isinstance(a, types.NoneType):
        return lambda a, r, lo, hi: None
    return lambda a, r, lo, hi: a[r, lo:hi]


def rows_plus_carry(gh, carry_ht, dh, u0, u1):
    """``dh[:, u0:u1] = gh[:, u0:u1] + carry_ht[u0:u1]^T``, or the carry alone where ``gh`` is
    None (``_rows_plus_carry`` picks the form when numba types a kernel). ``carry_ht`` None:
    the carry is already in ``dh`` (the rows form's product), and ``gh`` is added to it.

    Example:
        >>> dh = np.zeros((1, 2))
        >>> rows_plus_carry(None, np.ones((2, 1)), dh, 1, 2)
        >>> dh.tolist()
        [[0.0, 1.0]]
        >>> rows_plus_carry(np.ones((1, 2)), None, dh, 1, 2)
        >>> dh.tolist()
        [[0.0, 2.0]]
    """
    part = dh[:, u0:u1] if carry_ht is None else carry_ht[u0:u1].T
    dh[:, u0:u1] = part if gh is None else gh[:, u0:u1] + part


@numba.njit(inline="always")
def _add_rows(gh, dh, u0, u1):
    for r in range(dh.shape[0]):
        add, out = gh[r, u0:u1], dh[r, u0:u1]  # pieces indexed from 0: they vectorize
        for j in range(u1 - u0):
            out[j] = add[j] + out[j]


@overload(rows_plus_carry, inline="always")
def _rows_plus_carry(gh, carry_ht, dh, u0, u1):
    if isinstance(carry_ht, types.NoneType):
        if isinstance(gh, types.NoneType):
            return lambda gh, carry_ht, dh, u0, u1: None
        return lambda gh, carry_ht, dh, u0, u1: _add_rows(gh, dh, u0, u1)
    if isinstance(gh, types.NoneType):
        return lambda gh, carry_ht, dh, u0, u1: to_rows(carry_ht[u0:u1], dh[:, u0:u1])
    return lambda gh, carry_ht, dh, u0, u1: sum_to_rows(gh[:, u0:u1], carry_ht[u0:u1], dh[:, u0:u1])


@numba.njit(inline="always")
def lstm_grad_part(acts, c, c_prev, gh, gc, base, tc, carry_ht, carry_c, dg, dh, dc, u0, u1):
    """One LSTM backward step for hidden units ``[u0, u1)``, from the forward's saved gates
    [σi, σf, tanh g, σo] (N, 4H), cell ``c`` and the c it started from: ``dh = gh + carry_h``;
    with ``tc = tanh(c)``, ``dc = gc + carry_c + dh o (1 - tc²)``; ``dg = [dc g i (1 - i),
    dc c_prev f (1 - f), dc i (1 - g²), dh tc o (1 - o)] + base``; the next step's ``carry_c =
    dc f`` (``carry_h`` is ``dg @ W``, a GEMM, read from its transpose ``carry_ht``). The
    factors are the ones ``_scan_backward`` computed on whole sequences, in the same order;
    ``gh``, ``gc``, ``base`` None: absent; ``tc`` None: ``tanh_f32`` here.

    Example:
        >>> acts, c = np.full((1, 4), 0.5, np.float32), np.zeros((1, 1), np.float32)
        >>> dg, dh, dc = np.empty((1, 4), np.float32), np.empty_like(c), np.empty_like(c)
        >>> lstm_grad_part(acts, c, c, c + 1, None, None, None, c.T, c.copy(), dg, dh, dc, 0, 1)
        >>> dc.tolist(), dg.tolist()
        ([[0.5]], [[0.0625, 0.0, 0.1875, 0.0]])
    """
    hidden = acts.shape[1] // 4
    rows_plus_carry(gh, carry_ht, dh, u0, u1)
    lo = (u0, hidden + u0, 2 * hidden + u0, 3 * hidden + u0)
    for r in range(dh.shape[0]):
        i, f = acts[r, lo[0] : lo[0] + u1 - u0], acts[r, lo[1] : lo[1] + u1 - u0]
        g, o = acts[r, lo[2] : lo[2] + u1 - u0], acts[r, lo[3] : lo[3] + u1 - u0]
        di, df = dg[r, lo[0] : lo[0] + u1 - u0], dg[r, lo[1] : lo[1] + u1 - u0]
        dgg, do = dg[r, lo[2] : lo[2] + u1 - u0], dg[r, lo[3] : lo[3] + u1 - u0]
        bi, bf = piece(base, r, lo[0], lo[0] + u1 - u0), piece(base, r, lo[1], lo[1] + u1 - u0)
        bg, bo = piece(base, r, lo[2], lo[2] + u1 - u0), piece(base, r, lo[3], lo[3] + u1 - u0)
        c_r, c_from, dh_r, dc_r = c[r, u0:u1], c_prev[r, u0:u1], dh[r, u0:u1], dc[r, u0:u1]
        gc_r, tc_r, carry_r = piece(gc, r, u0, u1), piece(tc, r, u0, u1), carry_c[r, u0:u1]
        for j in range(u1 - u0):
            t = tanh_at(tc_r, c_r[j], j)
            h = dh_r[j]
            v = add_or(gc_r, carry_r[j], j) + h * (o[j] * (ONE - t * t))
            dc_r[j] = v
            carry_r[j] = v * f[j]
            di[j] = add_or(bi, v * (g[j] * i[j] * (ONE - i[j])), j)
            df[j] = add_or(bf, v * (c_from[j] * f[j] * (ONE - f[j])), j)
            dgg[j] = add_or(bg, v * (i[j] * (ONE - g[j] * g[j])), j)
            do[j] = add_or(bo, h * (t * o[j] * (ONE - o[j])), j)


@numba.njit(inline="always")
def gru_grad_part(gates, hn, h_prev, gh, base, carry_ht, carry_z, dg, dh, u0, u1):
    """One GRU backward step for hidden units ``[u0, u1)``, from the forward's saved gates
    [r, z, n] (N, 3H), hidden projection ``hn = W_hn h + b_hn`` and the h it started from:
    ``dh = gh + carry_h + carry_z``; with ``per_n = (1 - z)(1 - n²)``, ``dg = [dh per_n hn
    r (1 - r), dh (h_prev - n) z (1 - z), dh per_n r] + base``; the next step's ``carry_z = dh
    z`` (``carry_h`` is ``dg @ W``, a GEMM, read from its transpose ``carry_ht``). The factors
    are the ones ``gru_scan``'s backward computed on whole sequences, in the same order; ``gh``,
    ``base`` None: absent.

    Example:
        >>> gates, one = np.full((1, 3), 0.5), np.ones((1, 1))
        >>> dg, dh = np.empty((1, 3)), np.empty((1, 1))
        >>> gru_grad_part(gates, one, one, one, None, one.T * 0, one * 0, dg, dh, 0, 1)
        >>> dh.tolist(), dg.tolist()
        ([[1.0]], [[0.09375, 0.125, 0.1875]])
    """
    hidden = gates.shape[1] // 3
    rows_plus_carry(gh, carry_ht, dh, u0, u1)  # then + carry_z
    lo = (u0, hidden + u0, 2 * hidden + u0)
    units = u1 - u0
    for r in range(dh.shape[0]):
        # row pieces indexed from 0: whole-row indexing did not vectorize
        rr, z = gates[r, lo[0] : lo[0] + units], gates[r, lo[1] : lo[1] + units]
        g = gates[r, lo[2] : lo[2] + units]
        d_r, d_z = dg[r, lo[0] : lo[0] + units], dg[r, lo[1] : lo[1] + units]
        d_n = dg[r, lo[2] : lo[2] + units]
        b_r, b_z = piece(base, r, lo[0], lo[0] + units), piece(base, r, lo[1], lo[1] + units)
        b_n = piece(base, r, lo[2], lo[2] + units)
        dh_r, cz_r, hn_r, hp_r = dh[r, u0:u1], carry_z[r, u0:u1], hn[r, u0:u1], h_prev[r, u0:u1]
        for j in range(units):
            h = dh_r[j] + cz_r[j]
            dh_r[j] = h
            cz_r[j] = h * z[j]
            per_n = (ONE - z[j]) * (ONE - g[j] * g[j])
            d_r[j] = add_or(b_r, h * (per_n * hn_r[j] * (rr[j] * (ONE - rr[j]))), j)
            d_z[j] = add_or(b_z, h * ((hp_r[j] - g[j]) * (z[j] * (ONE - z[j]))), j)
            d_n[j] = add_or(b_n, h * (per_n * rr[j]), j)


def _code(code: Any) -> tuple:
    # a code object's bytecode, names and constants, nested ones (the overloads' lambdas)
    # included; not their repr, which carries addresses
    consts = tuple(_code(c) if inspect.iscode(c) else repr(c) for c in code.co_consts)
    return code.co_code, code.co_names, consts


def _digest() -> str:
    helpers = (add_or, _add_or, tanh_at, _tanh_at, piece, _piece, rows_plus_carry, _rows_plus_carry)
    codes = tuple(_code(f.__code__) for f in helpers)
    steps = fingerprint(lstm_grad_part) + fingerprint(gru_grad_part) + fingerprint(_add_rows)
    inlined = f"{steps}{TANH_FINGERPRINT}{tiles.FINGERPRINT}"
    return hashlib.sha256(repr((codes, ONE, inlined)).encode()).hexdigest()[:16]


FINGERPRINT = _digest()
"""A digest of everything here that a step kernel inlines (the typing-time helpers, the LSTM
and GRU steps, ``tanh_f32``, the tiles, ``ONE``): kernels add it to their cache stem, since the
cache key hashes a kernel's own bytecode only."""
