"""An LSTM layer's recurrences, forward and backward, split by hidden units into two parts that
two threads run in lockstep (``base.lockstep``): each part's GEMM on its own thread, on one
BLAS thread, and its share of the cell.

A step's GEMM (``W_hh (4H, H) @ h (H, N)``, N the batch) ran on OpenBLAS's two threads, then
the cell on one (~54 + 16 us at H = 256, N = 16). Each half of the units needs only its own
gates' rows of ``W_hh``, so two threads can each run a 512-row GEMM (~48 us on one core) and
half the cell, waiting for each other once a step: ~66-77 us a step measured in the loop. The
backward splits the same way: a part's rows of the carry ``W^T[units] @ dg^T`` and its units'
factors.

The split and which layers take it are ``unit_parts``' (a fixed split: the same bits on any
thread count), as are the row blocks a part's GEMM is cut into where OpenBLAS has a small-matrix
kernel that needs no packing (``unit_parts.row_block``: 80 -> 63 us a step at N = 16, H =
256). Where the batch is whole vectors, a part's product is register tiles reading its weight
rows where they lie instead (``unit_tiles``: 64 steps at N = 16, H = 256 on a Zen 4, forward
5.8-6.1 -> 3.9-4.7 ms, backward 5.6-6.0 -> 4.2-4.3), the backward's carry reading dg
feature-major. Where every part is whole vectors of units too (``unit_tiles.rows_fit``), the
forward takes the rows form instead: the tiles with the operands' roles swapped write each
part's gate columns of ``h @ W_hh^T`` straight into the step's gates (N, 4H) and read h where
the previous step wrote it, so no step transposes (the feature-major products' transposing add
cost ~11 us a step where the tiles had just flushed the caches; 64 steps at N = 16, H = 256:
4.25-5.09 -> 3.83-4.49 ms, alternated, the same bits). Its backward likewise: a part's carry
``dg_{t+1} @ W_hh[:, units]`` straight into dh, reading dg where the step before wrote it
(``rows_product``'s tiles of two vectors), so no step transposes or copies dg for the next
(the feature-major copy cost each thread ~0.4 ms of 64 steps). Float32 numpy arrays only, with
OpenBLAS's ``cblas_sgemm`` (``cblas.sgemm``); callers keep their one-GEMM loops otherwise.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numba
import numpy as np

from dualflow.kernels.base.lockstep import claim_part, part_done, wait_for_step
from dualflow.kernels.fast_math.fast_tanh import tanh_f32
from dualflow.kernels.fast_math.scalars import fingerprint
from dualflow.kernels.linalg import grad_steps, unit_parts, unit_tiles
from dualflow.kernels.linalg.cblas import TRANS, sgemm
from dualflow.kernels.linalg.cells import activate_sigmoid, activate_tanh, cell_kernel
from dualflow.kernels.linalg.grad_steps import lstm_grad_part
from dualflow.kernels.linalg.tile_ir import LANES
from dualflow.kernels.linalg.tiles import sum_to_rows, to_fm
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
def lstm_row_cell(gr, a, b, c_from, c_to, h_to):
    """One row's cell for units ``[a, b)``: its gate pre-activations in ``gr`` (4H) activated in
    place [σ, σ, tanh, σ], then ``c = σf c_from + σi tanh g`` and ``h = σo tanh(c)`` into the
    row pieces ``c_to`` and ``h_to``, each operation rounded as the numpy cell's."""
    units, hidden = b - a, gr.shape[0] // 4
    # the part's slices, indexed from 0: the loops then vectorize (indexing whole rows from a
    # to b did not: ~8x slower)
    i, f = gr[a:b], gr[hidden + a : hidden + b]
    g, o = gr[2 * hidden + a : 2 * hidden + b], gr[3 * hidden + a : 3 * hidden + b]
    activate_sigmoid(i)
    activate_sigmoid(f)
    activate_tanh(g)
    activate_sigmoid(o)
    for j in range(units):
        v = f[j] * c_from[j]
        c_to[j] = v + i[j] * g[j]
    for j in range(units):
        h_to[j] = o[j] * tanh_f32(c_to[j])


@numba.njit(inline="always")
def lstm_cell_part(xw_t, rows, a, b, c_prev, gates_t, hs_t, cs_t, h_next):
    """The cell of one step for units ``[a, b)``: ``rows`` (4 x units, N) are their gates' rows
    of ``W_hh @ h`` ([i, f, g, o] blocks), added to the step's input projections ``xw_t`` (N,
    4H) into ``gates_t``, activated [σ, σ, tanh, σ]; then ``c = σf c_prev + σi tanh g`` and
    ``h = σo tanh(c)``, and h written feature-major to ``h_next`` (H, N). Each operation rounded
    as the numpy cell's; the one-GEMM loop runs it over all units (``lstm_forward``)."""
    units, n, hidden = b - a, hs_t.shape[0], hs_t.shape[1]
    for g in range(4):
        lo = g * hidden + a
        sum_to_rows(xw_t[:, lo : lo + units], rows[g * units : (g + 1) * units],
                    gates_t[:, lo : lo + units])  # fmt: skip
    for r in range(n):
        lstm_row_cell(gates_t[r], a, b, c_prev[r, a:b], cs_t[r, a:b], hs_t[r, a:b])
    to_fm(hs_t[:, a:b], h_next[a:b])


@numba.njit(inline="always")
def forward_part(gemm, block, wide, xw_t, w_parts, a, b, h_prev, c_prev, product, gates_t, hs_t,
                 cs_t, h_next):  # fmt: skip
    """One part's forward step: its gate rows' product into ``product`` (rows ``[4a, 4b)``) by
    the register tiles where ``wide`` (the batch, ``unit_tiles.width``), else by BLAS in calls
    of ``block`` rows (``unit_parts.gemm_rows``), then its units' cell (``lstm_cell_part``)."""
    units, n, hidden = b - a, hs_t.shape[0], hs_t.shape[1]
    rows = product[4 * a : 4 * b]
    part_product(gemm, block, wide, 4 * units, n, hidden, w_parts[4 * a :].ctypes.data,
                 w_parts.shape[1], h_prev.ctypes.data, rows.ctypes.data)  # fmt: skip
    lstm_cell_part(xw_t, rows, a, b, c_prev, gates_t, hs_t, cs_t, h_next)


def forward_loop(gemm, block, wide, xw, w_parts, bounds, c0, h_fm, product, gates, hs, cs, first,
                 sync):  # fmt: skip
    # one thread's run of the forward: h_fm (2, H, N) holds h feature-major, step t reading
    # h_fm[(t + 1) % 2] (h_fm[1] is h0) and writing h_fm[t % 2]
    steps, parts = xw.shape[0], bounds.shape[0] - 1
    for t in range(steps):
        wait_for_step(sync, t, parts)
        c_prev = c0 if t == 0 else cs[t - 1]
        for m in range(parts):
            k = (first + m) % parts
            if not claim_part(sync, t, parts, k):
                continue
            a, b = bounds[k], bounds[k + 1]
            if b > a:
                forward_part(gemm, block, wide, xw[t], w_parts, a, b, h_fm[(t + 1) % 2], c_prev,
                             product, gates[t], hs[t], cs[t], h_fm[t % 2])  # fmt: skip
            part_done(sync)


@numba.njit(inline="always")
def rows_forward_part(xw_t, blocks, a, b, h_prev, c_prev, gates_t, hs_t, cs_t):
    """One part's forward step in the rows form (``unit_tiles.rows_fit``): its gate columns of
    ``h_prev @ W_hh^T`` straight into ``gates_t`` (N, 4H) by ``rows_product``, a block of
    ``LANES`` columns at a time from ``blocks`` (``unit_tiles.column_blocks`` of ``W_hh``: the
    block of gate columns ``[c, c + LANES)`` is ``blocks[c // LANES]``);
    then, row by row, the step's input projections added (``xw + product``, as the cell of
    ``lstm_cell_part`` adds them) and its units' cell, h written to ``hs_t``, which the next
    step reads as it is: no transposes."""
    units, n, hidden = b - a, hs_t.shape[0], hs_t.shape[1]
    for block in range(4 * units // LANES):
        gate, unit = divmod(block * LANES, units)
        column = gate * hidden + a + unit
        rows_product(1, n, hidden, h_prev.ctypes.data, hidden,
                     blocks[column // LANES].ctypes.data, gates_t[0, column:].ctypes.data,
                     4 * hidden)  # fmt: skip
    for r in range(n):
        gr, xr = gates_t[r], xw_t[r]
        for gate in range(4):
            lo = gate * hidden + a
            seg, add = gr[lo : lo + units], xr[lo : lo + units]
            for j in range(units):
                seg[j] = add[j] + seg[j]
        lstm_row_cell(gr, a, b, c_prev[r, a:b], cs_t[r, a:b], hs_t[r, a:b])


def rows_forward_loop(xw, blocks, bounds, h0, c0, gates, hs, cs, first, sync):
    # one thread's run of the rows form: step t reads h from hs[t - 1] (h0 first)
    steps, parts = xw.shape[0], bounds.shape[0] - 1
    for t in range(steps):
        wait_for_step(sync, t, parts)
        c_prev = c0 if t == 0 else cs[t - 1]
        h_prev = h0 if t == 0 else hs[t - 1]
        for m in range(parts):
            k = (first + m) % parts
            if not claim_part(sync, t, parts, k):
                continue
            if bounds[k + 1] > bounds[k]:
                rows_forward_part(xw[t], blocks, bounds[k], bounds[k + 1], h_prev, c_prev,
                                  gates[t], hs[t], cs[t])  # fmt: skip
            part_done(sync)


def backward_loop(gemm, block, wide, acts, cs, c0, gh, gc, base, wt, bounds, carry_ht, carry_c,
                  dg_fm, outs, first, sync):  # fmt: skip
    # one thread's run of the backward, last step first: a part's carry rows carry_ht[a:b] =
    # W^T[a:b] @ dg[t + 1]^T (every part of step t + 1 is done), then its units' factors; with
    # the tiles (``wide``), each part also writes its gate columns of dg[t] feature-major into
    # dg_fm[s % 2] (2, 4H, N), which the next step's carries read
    dg, dh, dc = outs
    steps, n, hidden = cs.shape
    parts = bounds.shape[0] - 1
    for s in range(steps):
        t = steps - 1 - s
        wait_for_step(sync, s, parts)
        c_prev = c0 if t == 0 else cs[t - 1]
        for m in range(parts):
            k = (first + m) % parts
            if not claim_part(sync, s, parts, k):
                continue
            a, b = bounds[k], bounds[k + 1]
            if b > a:
                if t < steps - 1 and wide:
                    tile_product(b - a, 4 * hidden, wt[a:].ctypes.data, wt.shape[1],
                                 dg_fm[(s - 1) % 2].ctypes.data, wide,
                                 carry_ht[a:].ctypes.data)  # fmt: skip
                elif t < steps - 1:
                    gemm_rows(gemm, TRANS, b - a, n, 4 * hidden, wt[a:].ctypes.data,
                              dg[t + 1].ctypes.data, 4 * hidden,
                              carry_ht[a:].ctypes.data, block)  # fmt: skip
                lstm_grad_part(acts[t], cs[t], c_prev, step_of(gh, t), step_of(gc, t),
                               step_of(base, t), None, carry_ht, carry_c, dg[t], dh[t], dc[t],
                               a, b)  # fmt: skip
                if wide and t:
                    gates_to_fm(dg[t], dg_fm[s % 2], 4, a, b)
            part_done(sync)


@numba.njit(inline="always")
def rows_backward_part(t, steps, acts_t, cs_t, c_prev, grads_t, blocks, a, b, carry_c, dg_next,
                       outs_t):  # fmt: skip
    """One part's backward step in the rows form: its units' carry ``dh_t[:, a:b] = dg_{t+1} @
    W_hh[:, a:b]`` straight into ``dh_t`` by ``rows_product`` (two vectors a tile, reading
    ``dg_next`` where the step before wrote it; zero at the last step), then its factors
    (``lstm_grad_part``, adding gh to the carry in place)."""
    dg_t, dh_t, dc_t = outs_t
    gh_t, gc_t, base_t = grads_t
    n, hidden = dh_t.shape
    wide = 2 * LANES
    if t < steps - 1:
        for block in range((b - a) // wide):
            rows_product(2, n, 4 * hidden, dg_next.ctypes.data, 4 * hidden,
                         blocks[a // wide + block].ctypes.data,
                         dh_t[0, a + block * wide :].ctypes.data, hidden)  # fmt: skip
    else:
        dh_t[:, a:b] = 0.0
    lstm_grad_part(acts_t, cs_t, c_prev, gh_t, gc_t, base_t, None, None, carry_c, dg_t, dh_t,
                   dc_t, a, b)  # fmt: skip


def rows_backward_loop(acts, cs, c0, gh, gc, base, blocks, bounds, carry_c, outs, first, sync):
    # one thread's run of the rows form's backward, last step first: step t's carries read
    # dg[t + 1], every part of which is done
    dg, dh, dc = outs
    steps, parts = cs.shape[0], bounds.shape[0] - 1
    for s in range(steps):
        t = steps - 1 - s
        wait_for_step(sync, s, parts)
        c_prev = c0 if t == 0 else cs[t - 1]
        for m in range(parts):
            k = (first + m) % parts
            if not claim_part(sync, s, parts, k):
                continue
            if bounds[k + 1] > bounds[k]:
                rows_backward_part(t, steps, acts[t], cs[t], c_prev,
                                   (step_of(gh, t), step_of(gc, t), step_of(base, t)), blocks,
                                   bounds[k], bounds[k + 1], carry_c, dg[min(t + 1, steps - 1)],
                                   (dg[t], dh[t], dc[t]))  # fmt: skip
            part_done(sync)


CELL = fingerprint(lstm_cell_part) + fingerprint(lstm_row_cell)
"""A digest of the cell, for the stems of the kernels inlining it (``lstm_forward``'s too)."""
_INLINED = hashlib.sha256(
    f"{fingerprint(forward_part)}{fingerprint(rows_forward_part)}{fingerprint(rows_backward_part)}"
    f"{CELL}{unit_parts.FINGERPRINT}"
    f"{grad_steps.FINGERPRINT}"
    f"{unit_tiles.FINGERPRINT}".encode()
).hexdigest()[:16]


def lstm_forward_lockstep(xw: Any, h0: Any, c0: Any, w_hh: Any) -> tuple:
    """Every step's h, c (L, N, H) and activated gates (L, N, 4H) of one LSTM layer, as
    ``lstm_forward`` computes them, each part's GEMM on its own thread (float32, ``fits``).

    Example:
        >>> f32 = np.float32
        >>> hs, cs, _ = lstm_forward_lockstep(np.zeros((2, 1, 128), f32), np.zeros((1, 32), f32),
        ...     np.ones((1, 32), f32), np.zeros((128, 32), f32))
        >>> cs[:, 0, 0].tolist()
        [0.5, 0.25]
    """
    steps, n, four_h = xw.shape
    hidden = four_h // 4
    bounds, wide = unit_bounds(hidden), unit_tiles.width(n)
    gates, hs, cs = (np.empty((steps, n, f), np.float32) for f in (four_h, hidden, hidden))
    xw, c0 = np.ascontiguousarray(xw, dtype=np.float32), np.ascontiguousarray(c0, np.float32)
    if unit_tiles.rows_fit(n, bounds):
        blocks = unit_tiles.column_blocks(w_hh)
        args = (xw, blocks, bounds, np.ascontiguousarray(h0, np.float32), c0, gates, hs, cs)
        run(cell_kernel(rows_forward_loop, "lstm_rows_forward", _INLINED), args, steps)
        return hs, cs, gates
    h_fm = np.empty((2, hidden, n), np.float32)
    h_fm[1] = h0.T
    w_parts = gate_rows_by_part(w_hh, bounds, 4, pad=unit_tiles.SPREAD if wide else 0)
    args = (sgemm(), row_block(n, hidden, False), wide, xw, w_parts, bounds, c0, h_fm,
            np.empty((four_h, n), np.float32), gates, hs, cs)  # fmt: skip
    run(cell_kernel(forward_loop, "lstm_lockstep_forward", _INLINED), args, steps)
    return hs, cs, gates


def lstm_grad_lockstep(saved: tuple, grads: tuple, outs: tuple) -> None:
    """``recurrence.lstm_grad_recurrence``'s loop with each part's carry GEMM on its own thread:
    ``saved`` is ``(acts, cs, c0, weight_hh)``, ``grads`` ``(gh, gc, base)`` (None when absent),
    ``outs`` ``(dg, dh, dc)`` written; all C-ordered float32 (``fits``). The carries read
    ``weight_hh`` by columns, copied once a call into the layout the form takes.

    Example:
        >>> acts, cs = np.full((2, 1, 128), 0.5, np.float32), np.zeros((2, 1, 32), np.float32)
        >>> outs = (np.empty((2, 1, 128), np.float32), np.empty_like(cs), np.empty_like(cs))
        >>> lstm_grad_lockstep((acts, cs, cs[0], np.ones((128, 32), np.float32)),
        ...                    (np.ones_like(cs), None, None), outs)
        >>> outs[1][:, 0, 0].tolist()  # dh: gh, and at t = 0 plus dg[1] @ W (32 x 0.25)
        [9.0, 1.0]
    """
    acts, cs, c0, w = saved
    steps, n, hidden = cs.shape
    bounds = unit_bounds(hidden)
    wide = unit_tiles.width(n)
    if unit_tiles.rows_fit(n, bounds, vectors=2):
        args = (acts, cs, c0, *grads, unit_tiles.column_slices(w, vectors=2), bounds,
                np.zeros((n, hidden), np.float32), outs)  # fmt: skip
        run(cell_kernel(rows_backward_loop, "lstm_rows_backward", _INLINED), args, steps)
        return
    carry = (np.zeros((hidden, n), np.float32), np.zeros((n, hidden), np.float32))
    dg_fm = np.empty((2, 4 * hidden, n) if wide else (2, 0, 0), np.float32)
    block = row_block(n, 4 * hidden, True)
    wt = unit_tiles.transposed_rows(w, wide)
    args = (sgemm(), block, wide, acts, cs, c0, *grads, wt, bounds, *carry, dg_fm,
            outs)  # fmt: skip
    run(cell_kernel(backward_loop, "lstm_lockstep_backward", _INLINED), args, steps)
