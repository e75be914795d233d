"""A GRU layer's recurrences, forward and backward, split by hidden units into two parts that
two threads run in lockstep, as ``lstm_lockstep`` does for the LSTM: each part's gate rows of
``W_hh`` (3 x its units) in one single-thread GEMM with its rows of ``b_hh``, and its share of
the cell; in the backward its rows of the carry ``W^T[units] @ dg^T`` and its units' factors.
Where the parts are whole vectors, both directions take the rows form (``lstm_lockstep``'s
docstring says why), with the same bits.

The split and which layers take it are ``unit_parts``'; the cell's arithmetic and order are
``gru_forward``'s, so with the same GEMM rows the bits are the one-GEMM loop's. A batch of whole
vectors multiplies by register tiles, as the LSTM's parts do (``unit_tiles``).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numba
import numpy as np

from dualflow.kernels.base.lockstep import claim_part, part_done, wait_for_step
from dualflow.kernels.fast_math.scalars import fingerprint
from dualflow.kernels.linalg import grad_steps, unit_parts, unit_tiles
from dualflow.kernels.linalg.cblas import TRANS, sgemm
from dualflow.kernels.linalg.cells import activate_sigmoid, activate_tanh, cell_kernel
from dualflow.kernels.linalg.grad_steps import gru_grad_part
from dualflow.kernels.linalg.tile_ir import LANES
from dualflow.kernels.linalg.tiles import sum_to_rows, to_fm, to_rows
from dualflow.kernels.linalg.unit_parts import (
    gate_rows_by_part,
    gemm_rows,
    part_product,
    row_block,
    run,
    step_of,
    unit_bounds,
)
from dualflow.kernels.linalg.unit_tiles import gates_to_fm, rows_product, tile_product


@numba.njit(inline="always")
def gru_row_cell(gr, xr, a, b, hn, h_from, h_to):
    """One row's cell for units ``[a, b)``: ``gr`` (3H) holds ``xw + W h + b`` for [r, z] and
    gets σ of them, and ``n = tanh(xw_n + r hn)`` in its [n] columns (``xr`` the row's input
    projections); then ``h = n + z (h_from - n)`` into ``h_to``. Each operation rounded as the
    numpy cell's."""
    units, hidden = b - a, gr.shape[0] // 3
    # row pieces indexed from 0 (whole-row indexing did not vectorize)
    rr, z = gr[a:b], gr[hidden + a : hidden + b]
    g, x = gr[2 * hidden + a : 2 * hidden + b], xr[2 * hidden + a : 2 * hidden + b]
    activate_sigmoid(rr)
    activate_sigmoid(z)
    for j in range(units):
        g[j] = x[j] + rr[j] * hn[j]
    activate_tanh(g)
    for j in range(units):
        new = g[j]
        h_to[j] = new + z[j] * (h_from[j] - new)


@numba.njit(inline="always")
def gru_cell_part(xw_t, rows, bias, a, b, h_prev, gates_t, hs_t, hn_t, h_next):
    """The cell of one step for units ``[a, b)``: ``rows`` (3 x units, N) are their gates' rows
    of ``W_hh @ h`` ([r, z, n] blocks), which get their rows of ``b_hh`` (``bias[3a:3b]``, in
    the rows' order); then ``hn``, ``[r, z] = σ(xw + rows)``, ``n = tanh(xw_n + r hn)``, ``h =
    n + z (h_prev - n)``, and h written feature-major to ``h_next`` (H, N). Each operation
    rounded as the numpy cell's; the one-GEMM loop runs it over all units (``gru_forward``)."""
    units, n, hidden = b - a, hs_t.shape[0], hs_t.shape[1]
    for m in range(3 * units):
        shift = bias[3 * a + m]
        for r in range(n):
            rows[m, r] += shift
    to_rows(rows[2 * units :], hn_t[:, a:b])
    for g in range(2):
        lo = g * hidden + a
        sum_to_rows(xw_t[:, lo : lo + units], rows[g * units : (g + 1) * units],
                    gates_t[:, lo : lo + units])  # fmt: skip
    for r in range(n):
        gru_row_cell(gates_t[r], xw_t[r], a, b, hn_t[r, a:b], h_prev[r, a:b], hs_t[r, a:b])
    to_fm(hs_t[:, a:b], h_next[a:b])


@numba.njit(inline="always")
def forward_part(gemm, block, wide, xw_t, w_parts, bias, a, b, h_fm, h_prev, product, gates_t,
                 hs_t, hn_t, h_next):  # fmt: skip
    """One part's forward step: its gate rows' product into ``product`` (rows ``[3a, 3b)``) by
    the register tiles where ``wide`` (the batch, ``unit_tiles.width``), else by BLAS in calls
    of ``block`` rows (``unit_parts.gemm_rows``), then its units' cell (``gru_cell_part``)."""
    units, n, hidden = b - a, hs_t.shape[0], hs_t.shape[1]
    rows = product[3 * a : 3 * b]
    part_product(gemm, block, wide, 3 * units, n, hidden, w_parts[3 * a :].ctypes.data,
                 w_parts.shape[1], h_fm.ctypes.data, rows.ctypes.data)  # fmt: skip
    gru_cell_part(xw_t, rows, bias, a, b, h_prev, gates_t, hs_t, hn_t, h_next)


def forward_loop(gemm, block, wide, xw, w_parts, bias, bounds, h0, h_fm, product, gates, hs, hn,
                 first, sync):  # fmt: skip
    # one thread's run of the forward: h_fm (2, H, N) holds h feature-major, step t reading
    # h_fm[(t + 1) % 2] (h_fm[1] is h0) and writing h_fm[t % 2]
    steps, parts = xw.shape[0], bounds.shape[0] - 1
    for t in range(steps):
        wait_for_step(sync, t, parts)
        h_prev = h0 if t == 0 else hs[t - 1]
        for m in range(parts):
            k = (first + m) % parts
            if not claim_part(sync, t, parts, k):
                continue
            a, b = bounds[k], bounds[k + 1]
            if b > a:
                forward_part(gemm, block, wide, xw[t], w_parts, bias, a, b, h_fm[(t + 1) % 2],
                             h_prev, product, gates[t], hs[t], hn[t], h_fm[t % 2])  # fmt: skip
            part_done(sync)


def backward_loop(gemm, block, wide, gates, hn, hs, h0, gh, base, wt, bounds, carry_ht, carry_z,
                  dg_fm, outs, first, sync):  # fmt: skip
    # one thread's run of the backward, last step first: a part's carry rows carry_ht[a:b] =
    # W^T[a:b] @ dg[t + 1]^T (every part of step t + 1 is done), then its units' factors; with
    # the tiles (``wide``), each part also writes its gate columns of dg[t] feature-major into
    # dg_fm[s % 2] (2, 3H, N), which the next step's carries read
    dg, dh = outs
    steps, n, hidden = hs.shape
    parts = bounds.shape[0] - 1
    for s in range(steps):
        t = steps - 1 - s
        wait_for_step(sync, s, parts)
        h_prev = h0 if t == 0 else hs[t - 1]
        for m in range(parts):
            k = (first + m) % parts
            if not claim_part(sync, s, parts, k):
                continue
            a, b = bounds[k], bounds[k + 1]
            if b > a:
                if t < steps - 1 and wide:
                    tile_product(b - a, 3 * hidden, wt[a:].ctypes.data, wt.shape[1],
                                 dg_fm[(s - 1) % 2].ctypes.data, wide,
                                 carry_ht[a:].ctypes.data)  # fmt: skip
                elif t < steps - 1:
                    gemm_rows(gemm, TRANS, b - a, n, 3 * hidden, wt[a:].ctypes.data,
                              dg[t + 1].ctypes.data, 3 * hidden,
                              carry_ht[a:].ctypes.data, block)  # fmt: skip
                gru_grad_part(gates[t], hn[t], h_prev, step_of(gh, t), step_of(base, t),
                              carry_ht, carry_z, dg[t], dh[t], a, b)  # fmt: skip
                if wide and t:
                    gates_to_fm(dg[t], dg_fm[s % 2], 3, a, b)
            part_done(sync)


@numba.njit(inline="always")
def rows_forward_part(xw_t, blocks, b_hh, a, b, h_prev, gates_t, hs_t, hn_t):
    """One part's forward step in the rows form (``lstm_lockstep.rows_forward_part``'s): its
    gate columns of ``h_prev @ W_hh^T`` straight into ``gates_t`` ([r, z]) and ``hn_t`` ([n])
    by ``rows_product``, then row by row ``b_hh`` added to them, ``xw`` to [r, z], and its
    units' cell, h written to ``hs_t``; each operation in ``gru_cell_part``'s order. ``blocks``
    is ``unit_tiles.column_blocks`` of ``W_hh``."""
    units, n, hidden = b - a, hs_t.shape[0], hs_t.shape[1]
    for block in range(3 * units // LANES):
        gate, unit = divmod(block * LANES, units)
        column = gate * hidden + a + unit
        at, stride = hn_t[0, a + unit :].ctypes.data, hidden  # [n]: W_hn h, saved as it is
        if gate < 2:
            at, stride = gates_t[0, column:].ctypes.data, 3 * hidden
        rows_product(1, n, hidden, h_prev.ctypes.data, hidden,
                     blocks[column // LANES].ctypes.data, at, stride)  # fmt: skip
    for r in range(n):
        for gate in range(3):
            lo = gate * hidden + a
            seg = hn_t[r, a:b] if gate == 2 else gates_t[r, lo : lo + units]
            shift = b_hh[lo : lo + units]
            for j in range(units):
                seg[j] = seg[j] + shift[j]
        for gate in range(2):
            lo = gate * hidden + a
            seg, add = gates_t[r, lo : lo + units], xw_t[r, lo : lo + units]
            for j in range(units):
                seg[j] = add[j] + seg[j]
        gru_row_cell(gates_t[r], xw_t[r], a, b, hn_t[r, a:b], h_prev[r, a:b], hs_t[r, a:b])


def rows_forward_loop(xw, blocks, b_hh, bounds, h0, gates, hs, hn, first, sync):
    # one thread's run of the rows form: step t reads h from hs[t - 1] (h0 first)
    steps, parts = xw.shape[0], bounds.shape[0] - 1
    for t in range(steps):
        wait_for_step(sync, t, parts)
        h_prev = h0 if t == 0 else hs[t - 1]
        for m in range(parts):
            k = (first + m) % parts
            if not claim_part(sync, t, parts, k):
                continue
            if bounds[k + 1] > bounds[k]:
                rows_forward_part(xw[t], blocks, b_hh, bounds[k], bounds[k + 1], h_prev,
                                  gates[t], hs[t], hn[t])  # fmt: skip
            part_done(sync)


def rows_backward_loop(gates, hn, hs, h0, gh, base, blocks, bounds, carry_z, outs, first, sync):
    # the rows form's backward (``lstm_lockstep.rows_backward_loop``'s): a part's carry
    # dg[t + 1] @ W_hh[:, units] straight into dh[t] (zero at the last step), then its factors
    # (``gru_grad_part`` adding gh, then carry_z, to it)
    dg, dh = outs
    steps, n, hidden = hs.shape
    parts, wide = bounds.shape[0] - 1, 2 * LANES
    for s in range(steps):
        t = steps - 1 - s
        wait_for_step(sync, s, parts)
        h_prev = h0 if t == 0 else hs[t - 1]
        for m in range(parts):
            k = (first + m) % parts
            if not claim_part(sync, s, parts, k):
                continue
            a, b = bounds[k], bounds[k + 1]
            for block in range((b - a) // wide if t < steps - 1 else 0):
                rows_product(2, n, 3 * hidden, dg[t + 1].ctypes.data, 3 * hidden,
                             blocks[a // wide + block].ctypes.data,
                             dh[t, 0, a + block * wide :].ctypes.data, hidden)  # fmt: skip
            if t == steps - 1:
                dh[t, :, a:b] = 0.0
            gru_grad_part(gates[t], hn[t], h_prev, step_of(gh, t), step_of(base, t), None,
                          carry_z, dg[t], dh[t], a, b)  # fmt: skip
            part_done(sync)


CELL = fingerprint(gru_cell_part) + fingerprint(gru_row_cell)
"""A digest of the cell, for the stems of the kernels inlining it (``gru_forward``'s too)."""
_INLINED = hashlib.sha256(
    f"{fingerprint(forward_part)}{fingerprint(rows_forward_part)}{CELL}{unit_parts.FINGERPRINT}"
    f"{grad_steps.FINGERPRINT}"
    f"{unit_tiles.FINGERPRINT}".encode()
).hexdigest()[:16]


def gru_forward_lockstep(xw: Any, h0: Any, w_hh: Any, b_hh: Any) -> tuple:
    """Every step's h (L, N, H), gates (L, N, 3H) and ``W_hn h + b_hn`` (L, N, H) of one GRU
    layer, as ``gru_forward`` computes them, each part's GEMM on its own thread (float32,
    ``unit_parts.fits``).

    Example:
        >>> f32 = np.float32
        >>> hs, gates, hn = gru_forward_lockstep(np.zeros((2, 1, 96), f32), np.ones((1, 32), f32),
        ...     np.zeros((96, 32), f32), np.zeros(96, f32))
        >>> hs[:, 0, 0].tolist(), gates[0, 0, ::32].tolist()
        ([0.5, 0.25], [0.5, 0.5, 0.0])
    """
    steps, n, three_h = xw.shape
    hidden = three_h // 3
    bounds, wide = unit_bounds(hidden), unit_tiles.width(n)
    gates = np.empty((steps, n, three_h), np.float32)
    hs, hn = np.empty((steps, n, hidden), np.float32), np.empty((steps, n, hidden), np.float32)
    if unit_tiles.rows_fit(n, bounds):
        blocks = unit_tiles.column_blocks(w_hh)
        args = (np.ascontiguousarray(xw, dtype=np.float32), blocks,
                np.ascontiguousarray(b_hh, np.float32), bounds,
                np.ascontiguousarray(h0, np.float32), gates, hs, hn)  # fmt: skip
        run(cell_kernel(rows_forward_loop, "gru_rows_forward", _INLINED), args, steps)
        return hs, gates, hn
    h_fm = np.empty((2, hidden, n), np.float32)
    h_fm[1] = h0.T
    w_parts = gate_rows_by_part(w_hh, bounds, 3, pad=unit_tiles.SPREAD if wide else 0)
    args = (sgemm(), row_block(n, hidden, False), wide, np.ascontiguousarray(xw, dtype=np.float32),
            w_parts, gate_rows_by_part(b_hh, bounds, 3), bounds,
            np.ascontiguousarray(h0, np.float32), h_fm, np.empty((three_h, n), np.float32),
            gates, hs, hn)  # fmt: skip
    run(cell_kernel(forward_loop, "gru_lockstep_forward", _INLINED), args, steps)
    return hs, gates, hn


def gru_grad_lockstep(saved: tuple, grads: tuple, outs: tuple) -> None:
    """``recurrence.gru_grad_recurrence``'s loop with each part's carry GEMM on its own thread:
    ``saved`` is ``(gates, hn, hs, h0, weight_hh)``, ``grads`` ``(gh, base)`` (None when
    absent), ``outs`` ``(dg, dh)`` written; all C-ordered float32.

    Example:
        >>> gates, hs = np.full((2, 1, 96), 0.5, np.float32), np.ones((2, 1, 32), np.float32)
        >>> outs = (np.empty((2, 1, 96), np.float32), np.empty_like(hs))
        >>> gru_grad_lockstep((gates, hs, hs, hs[0], np.zeros((96, 32), np.float32)),
        ...                   (np.ones_like(hs), None), outs)
        >>> outs[1][:, 0, 0].tolist()  # dh: gh plus the next step's dh z
        [1.5, 1.0]
    """
    gates, hn, hs, h0, w = saved
    steps, n, hidden = hs.shape
    bounds = unit_bounds(hidden)
    if unit_tiles.rows_fit(n, bounds, vectors=2):
        args = (gates, hn, hs, h0, *grads, unit_tiles.column_slices(w, vectors=2),
                bounds, np.zeros((n, hidden), np.float32), outs)  # fmt: skip
        run(cell_kernel(rows_backward_loop, "gru_rows_backward", _INLINED), args, steps)
        return
    carry = (np.zeros((hidden, n), np.float32), np.zeros((n, hidden), np.float32))
    block, wide = row_block(n, 3 * hidden, True), unit_tiles.width(n)
    dg_fm = np.empty((2, 3 * hidden, n) if wide else (2, 0, 0), np.float32)
    wt = unit_tiles.transposed_rows(w, wide)
    args = (sgemm(), block, wide, gates, hn, hs, h0, *grads, wt, bounds, *carry,
            dg_fm, outs)  # fmt: skip
    run(cell_kernel(backward_loop, "gru_lockstep_backward", _INLINED), args, steps)
