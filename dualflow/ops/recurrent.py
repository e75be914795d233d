"""Recurrent ops: ``lstm_scan``, a whole LSTM layer's recurrence over a sequence as one op.

Written with per-step ops, an LSTM layer is ~15 small ops per time step forward and more
backward, and every ``xw[t]`` slice's gradient is a zero-filled array of the whole sequence
(quadratic in its length). As one op, the forward is a loop of one GEMM and a few numpy calls per
step; the backward recomputes every step's gates with one GEMM over all steps, runs only the
dh/dc recurrence step by step (one small GEMM each) and gives the input projections' gradient
as one stacked array and ``weight_hh``'s as one GEMM. The backward is written with ops, so it
is differentiable again (double backward) and traces like any other.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.errors import ShapeError
from dualflow.kernels.linalg import gemm
from dualflow.ops.activation import sigmoid, tanh
from dualflow.ops.dispatch import apply
from dualflow.ops.indexing import getitem
from dualflow.ops.join import concat, stack
from dualflow.ops.linalg import matmul
from dualflow.ops.registry import OPS, Meta, primitive
from dualflow.ops.shape import expand_dims, reshape, transpose
from dualflow.ops.validate import require_same_float


def _check(xw: Meta, h0: Meta, c0: Meta, w_hh: Meta) -> tuple[int, int, int]:
    if len(xw.shape) != 3 or len(w_hh.shape) != 2 or w_hh.shape[0] != 4 * w_hh.shape[1]:
        raise ShapeError(
            f"lstm_scan: expected xw (L, N, 4H) and weight_hh (4H, H), got {tuple(xw.shape)} "
            f"and {tuple(w_hh.shape)}"
        )
    steps, n, four_h = xw.shape
    hidden = w_hh.shape[1]
    if four_h != 4 * hidden or tuple(h0.shape) != (n, hidden) or tuple(c0.shape) != (n, hidden):
        raise ShapeError(
            f"lstm_scan: xw {tuple(xw.shape)}, h0 {tuple(h0.shape)}, c0 {tuple(c0.shape)} and "
            f"weight_hh {tuple(w_hh.shape)} do not fit (L, N, 4H), (N, H), (N, H), (4H, H)"
        )
    return steps, n, hidden


def _cell(xp: Any, gates: Any, c: Any, h_out: Any, c_out: Any) -> None:
    """One step from pre-activations (N, 4H) [i, f, g, o]: ``c_out``, ``h_out`` in place."""
    hidden = c.shape[-1]
    act = OPS["sigmoid"].forward(xp, gates)  # the op's own rounding (g's quarter is unused)
    g = OPS["tanh"].forward(xp, gates[:, 2 * hidden : 3 * hidden])
    xp.multiply(act[:, hidden : 2 * hidden], c, out=c_out)
    c_out += act[:, :hidden] * g
    xp.multiply(act[:, 3 * hidden :], OPS["tanh"].forward(xp, c_out), out=h_out)


@primitive("lstm_scan", saves=("x0", "x1", "x2", "x3", "y0", "y1"), nout=2, aliasing="fresh")
class LSTMScan:
    """An LSTM layer's recurrence: every step's hidden and cell state (L, N, H) each, from the
    input projections ``xw`` (L, N, 4H) (biases included), ``h0``, ``c0`` and ``weight_hh``."""

    def infer(xw: Meta, h0: Meta, c0: Meta, w_hh: Meta) -> tuple[Meta, Meta]:
        steps, n, hidden = _check(xw, h0, c0, w_hh)
        dtype = np.result_type(*(np.dtype(m.dtype) for m in (xw, h0, c0, w_hh)))
        return Meta((steps, n, hidden), dtype), Meta((steps, n, hidden), dtype)

    def forward(xp, xw, h0, c0, w_hh):
        steps, n, hidden = xw.shape[0], xw.shape[1], w_hh.shape[1]
        dtype = np.result_type(xw.dtype, h0.dtype, c0.dtype, w_hh.dtype)
        hs, cs = xp.empty((steps, n, hidden), dtype), xp.empty((steps, n, hidden), dtype)
        gates, w_t = xp.empty((n, 4 * hidden), dtype), w_hh.T
        h, c = h0, c0
        for t in range(steps):
            gemm.matmul(xp, h, w_t, out=gates)
            gates += xw[t]
            _cell(xp, gates, c, hs[t], cs[t])
            h, c = hs[t], cs[t]
        return hs, cs

    def backward(ctx, ghs, gcs):
        return _scan_backward(ctx.x0, ctx.x1, ctx.x2, ctx.x3, ctx.y0, ctx.y1, ghs, gcs)


def _previous(first: Any, states: Any) -> Any:
    # (L, N, H): the state each step starts from (first, then every step's but the last)
    return concat([expand_dims(first, 0), getitem(states, slice(None, -1))], 0)


def _factors(xw: Any, w_hh: Any, h_prev: Any, c_prev: Any, cs: Any) -> tuple:
    """Everything of the backward that needs no recurrence, on whole sequences: each step's
    dgates per unit of dc (L, N, 4, H), per unit of dh (o's block), dc per unit of dh, and f."""
    gates = xw + matmul(h_prev, transpose(w_hh))  # every step's gates in one GEMM
    n, hidden = h_prev.shape[1], h_prev.shape[2]
    gates = reshape(gates, (gates.shape[0], n, 4, hidden))
    i, f, o = (sigmoid(getitem(gates, (slice(None), slice(None), k))) for k in (0, 1, 3))
    g = tanh(getitem(gates, (slice(None), slice(None), 2)))
    tc = tanh(cs)
    zero = c_prev * 0.0
    per_dc = stack([g * i * (1.0 - i), c_prev * f * (1.0 - f), i * (1.0 - g * g), zero], 2)
    per_dh = stack([zero, zero, zero, tc * o * (1.0 - o)], 2)
    return per_dc, per_dh, o * (1.0 - tc * tc), f


def _scan_backward(xw, h0, c0, w_hh, hs, cs, ghs, gcs) -> tuple:
    steps, n, hidden = hs.shape
    h_prev, c_prev = _previous(h0, hs), _previous(c0, cs)
    per_dc, per_dh, dc_per_dh, f = _factors(xw, w_hh, h_prev, c_prev, cs)
    dh = dc = None
    dgates: list[Any] = [None] * steps
    for t in reversed(range(steps)):
        dh = _plus(getitem(ghs, t) if ghs is not None else None, dh)
        dc = _plus(getitem(gcs, t) if gcs is not None else None, dc)
        if dh is not None:
            dc = _plus(dc, dh * getitem(dc_per_dh, t))
        if dc is None:  # nothing reaches this step or any before it
            dgates[t] = reshape(getitem(per_dc, t) * 0.0, (n, 4 * hidden))
            continue
        d = expand_dims(dc, 1) * getitem(per_dc, t)
        d = d if dh is None else d + expand_dims(dh, 1) * getitem(per_dh, t)
        dgates[t] = reshape(d, (n, 4 * hidden))
        dh, dc = matmul(dgates[t], w_hh), dc * getitem(f, t)
    gx = stack(dgates, 0)
    rows = (steps * n, 4 * hidden)
    gw = matmul(transpose(reshape(gx, rows)), reshape(h_prev, (steps * n, hidden)))
    zeros = h0 * 0.0
    return gx, _or(dh, zeros), _or(dc, zeros), gw


def _plus(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else a + b


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def lstm_scan(xw: Any, h0: Any, c0: Any, weight_hh: Any) -> tuple[Any, Any]:
    """Every step's hidden and cell state of one LSTM layer (gates [i, f, g, o]).

    ``xw`` (L, N, 4H) holds each step's input projection ``x W_ih^T + b_ih + b_hh``; step t
    computes ``gates = xw[t] + h W_hh^T``, ``c = σ(f) c + σ(i) tanh(g)``, ``h = σ(o) tanh(c)``.
    Returns ``(hs, cs)``, both (L, N, H).

    Example:
        >>> import numpy as np
        >>> from dualflow import ops
        >>> hs, cs = ops.lstm_scan(np.zeros((3, 1, 8)), np.zeros((1, 2)), np.ones((1, 2)),
        ...                        np.zeros((8, 2)))
        >>> hs.shape, [round(v, 4) for v in cs.tolist()[0][0]]
        ((3, 1, 2), [0.5, 0.5])
    """
    require_same_float("lstm_scan", xw, weight_hh, "xw", "weight_hh")
    return apply(LSTMScan, xw, h0, c0, weight_hh)
