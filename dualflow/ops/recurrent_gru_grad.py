"""``gru_scan_grad``: the recurrence of ``gru_scan``'s backward as one op, computing its per-step
factors from the forward's saved gates, hidden projections and states.

As ``lstm_scan_grad`` does for the LSTM (``recurrent_grad``): one fused numba step and one GEMM
per time step (``kernels/linalg/recurrence.py``), a node count that does not depend on the
length, gradients that are absent passed as nothing rather than zeros, and a backward (the
adjoint recurrence chained through the factors) written with ops, so double backward is exact.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.errors import ShapeError
from dualflow.kernels.linalg.recurrence import gru_grad_recurrence
from dualflow.ops.creation import zeros_like
from dualflow.ops.dispatch import apply
from dualflow.ops.indexing import getitem
from dualflow.ops.join import concat, stack
from dualflow.ops.linalg import matmul
from dualflow.ops.recurrent_grad import given_count, given_shapes, previous_states
from dualflow.ops.reduction import sum as reduce_sum
from dualflow.ops.registry import Meta, primitive
from dualflow.ops.shape import expand_dims, reshape, transpose

SAVED = ("gates", "hn", "hs", "h0", "weight_hh")
GRADS = ("gh", "base")


def _check(metas: tuple, given: tuple) -> tuple[int, int, int]:
    given_count("gru_scan_grad", metas, given, SAVED, GRADS)
    hs, w = metas[2], metas[4]
    if len(hs.shape) != 3 or len(w.shape) != 2:
        raise ShapeError(
            f"gru_scan_grad: expected hs (L, N, H) and weight_hh (3H, H), got "
            f"{tuple(hs.shape)} and {tuple(w.shape)}"
        )
    steps, n, hidden = hs.shape
    state, gates = (steps, n, hidden), (steps, n, 3 * hidden)
    saved = (gates, state, state, (n, hidden), (3 * hidden, hidden))
    layout = "gates (L, N, 3H), hn and hs (L, N, H), h0 (N, H), weight_hh (3H, H), gh (L, N, H), "
    layout += "base (L, N, 3H)"
    given_shapes("gru_scan_grad", metas, given, zip(SAVED + GRADS, (*saved, state, gates)), layout)
    return steps, n, hidden


def _scratch(metas: tuple, attrs: dict) -> int:
    # the two (N, H) carries between steps, weight_hh (3H, H) transposed
    _, _, (state, dtype), *_ = metas
    n, hidden = state[1], state[2]
    return (2 * n * hidden + 3 * hidden * hidden) * np.dtype(dtype).itemsize


@primitive(
    "gru_scan_grad",
    saves=("x0", "x1", "x2", "x3", "x4", "y0", "y1"),
    nout=2,
    aliasing="fresh",
    scratch=_scratch,
)
class GRUScanGrad:
    """The backward recurrence of a GRU layer from its forward's saved arrays: each step's
    hidden-projection gradients (L, N, 3H) and the dh (L, N, H) it reached (see
    ``gru_scan_grad``); ``given`` flags which of the gradients gh, base follow."""

    def infer(*metas: Meta, given: tuple) -> tuple[Meta, Meta]:
        steps, n, hidden = _check(metas, given)
        dtype = np.result_type(*(np.dtype(m.dtype) for m in metas))
        return Meta((steps, n, 3 * hidden), dtype), Meta((steps, n, hidden), dtype)

    def forward(xp, gates, hn, hs, h0, w_hh, *grads, given):
        dtype = np.result_type(gates, hn, hs, h0, w_hh, *grads)
        present = iter(grads)
        full = tuple(next(present) if g else None for g in given)
        return gru_grad_recurrence(xp, (gates, hn, hs, h0, w_hh), full, dtype)

    def backward(ctx, gdg, gdh):
        outs = (ctx.y0, ctx.y1)
        cots = tuple(zeros_like(y) if g is None else g for g, y in zip((gdg, gdh), outs))
        gates, hn, hs, h0, w = (ctx.input(k) for k in range(5))
        steps, n, hidden = ctx.in_shapes[2]  # sizes from the node (expressions in a trace)
        sizes = (steps, n, hidden)
        h_prev = previous_states(h0, hs)
        q = reshape(stack(gru_factors(gates, hn, h_prev, sizes)[:3], 2), (steps, n, 3 * hidden))
        z = gate_blocks(gates, sizes)[1]
        lh, gq, lg, gz, gw = _adjoint((q, z, w), outs, cots, sizes)
        g_gates, g_hn, g_hs, g_h0 = _factors_vjp((gates, hn, h_prev), (gq, gz), sizes)
        present = tuple(g for g, flag in zip((lh, lg), ctx.attrs["given"]) if flag)
        return g_gates, g_hn, g_hs, g_h0, gw, *present


def gate_blocks(gates: Any, sizes: tuple) -> tuple:
    """The three (L, N, H) gate blocks [r, z, n] of (L, N, 3H) gates, as views.

    Example:
        >>> [b.item() for b in gate_blocks(np.arange(3.0).reshape(1, 1, 3), (1, 1, 1))]
        [0.0, 1.0, 2.0]
    """
    blocks = reshape(gates, (*sizes[:2], 3, sizes[2]))
    return tuple(getitem(blocks, (slice(None), slice(None), k)) for k in range(3))


def gru_factors(gates: Any, hn: Any, h_prev: Any, sizes: tuple) -> tuple:
    """The hidden projection's gradient per unit of dh, block by block (r, z, n; (L, N, H)
    each), and ``per_n = (1 - z)(1 - n²)``, n's pre-activation gradient per unit of dh: what
    the step kernel computes per step, with ops (double backward, ``dx_n``).

    Example:
        >>> q_r, q_z, q_n, per_n = gru_factors(np.full((1, 1, 3), 0.5), np.ones((1, 1, 1)),
        ...                                    np.ones((1, 1, 1)), (1, 1, 1))
        >>> [v.item() for v in (q_r, q_z, q_n, per_n)]
        [0.09375, 0.125, 0.1875, 0.375]
    """
    r, z, g_n = gate_blocks(gates, sizes)
    per_n = (1.0 - z) * (1.0 - g_n * g_n)
    return per_n * hn * (r * (1.0 - r)), (h_prev - g_n) * (z * (1.0 - z)), per_n * r, per_n


def _factors_vjp(saved: tuple, grads: tuple, sizes: tuple) -> tuple:
    """The vjp of the factors (q, and z as the dh carry's) w.r.t. the gates, hn, hs and h0."""
    (gates, hn, h_prev), (gq, gz) = saved, grads
    r, z, g_n = gate_blocks(gates, sizes)
    gq_r, gq_z, gq_n = gate_blocks(gq, sizes)
    slope_n, slope_r, slope_z = 1.0 - g_n * g_n, r * (1.0 - r), z * (1.0 - z)
    per_n = (1.0 - z) * slope_n
    d_per_n = gq_r * (hn * slope_r) + gq_n * r
    d_r = gq_r * (per_n * hn * (1.0 - 2.0 * r)) + gq_n * per_n
    d_z = gq_z * ((h_prev - g_n) * (1.0 - 2.0 * z)) - d_per_n * slope_n + gz
    d_n = -(d_per_n * (2.0 * g_n * (1.0 - z))) - gq_z * slope_z
    d_h_prev = gq_z * slope_z  # step t's h_prev is h_{t-1} (h0 at t = 0)
    later = concat([getitem(d_h_prev, slice(1, None)), zeros_like(getitem(d_h_prev, slice(0, 1)))])
    g_gates = reshape(stack([d_r, d_z, d_n], 2), (*sizes[:2], 3 * sizes[2]))
    return g_gates, gq_r * (per_n * slope_r), later, getitem(d_h_prev, 0)


def _adjoint(coefficients: tuple, outs: tuple, cots: tuple, sizes: tuple) -> tuple:
    """The vjp of the GRU recurrence, forward in time (step t's dg fed step t-1's dh through
    ``@ weight_hh``, its dh through ``* z``)."""
    (q, z, w), (dg, dh), (ug, uh) = coefficients, outs, cots
    steps, n, hidden = sizes
    q3, w_t = reshape(q, (steps, n, 3, hidden)), transpose(w)
    lgs: list[Any] = []
    lhs: list[Any] = []
    for t in range(steps):
        lg = getitem(ug, t)
        if t:
            lg = lg + matmul(lhs[-1], w_t)
        lh = reduce_sum(reshape(lg, (n, 3, hidden)) * getitem(q3, t), axis=1) + getitem(uh, t)
        if t:
            lh = lh + lhs[-1] * getitem(z, t)
        lgs.append(lg)
        lhs.append(lh)
    lg, lh = stack(lgs, 0), stack(lhs, 0)
    gq = reshape(reshape(lg, (steps, n, 3, hidden)) * expand_dims(dh, 2), (steps, n, 3 * hidden))
    lh_before = concat([expand_dims(zeros_like(lhs[0]), 0), getitem(lh, slice(None, -1))], 0)
    later = reshape(getitem(dg, slice(1, None)), ((steps - 1) * n, 3 * hidden))
    earlier = reshape(getitem(lh, slice(None, -1)), ((steps - 1) * n, hidden))
    return lh, gq, lg, lh_before * dh, matmul(transpose(later), earlier)


def gru_scan_grad(
    gates: Any, hn: Any, hs: Any, h0: Any, weight_hh: Any, gh: Any = None, base: Any = None
) -> tuple[Any, Any]:
    """The backward recurrence of a GRU layer (``gru_scan``'s), last step first, from the
    forward's saved gates [r, z, n] (L, N, 3H), hidden projections ``hn = W_hn h + b_hn`` and
    states ``hs`` (L, N, H), first state ``h0`` (N, H) and ``weight_hh`` (3H, H).

    ``gh`` (L, N, H) is the gradient reaching each step's h and ``base`` (L, N, 3H) the part of
    the hidden projection's gradient that needs no recurrence; None where absent (no zeros are
    made). Step t, with ``h_prev`` the h it started from and ``per_n = (1 - z)(1 - n²)``:
    ``dh_t = gh_t + dg_{t+1} @ weight_hh + dh_{t+1} z_{t+1}``, ``dg_t = [dh_t per_n hn r (1 - r),
    dh_t (h_prev - n) z (1 - z), dh_t per_n r] + base_t``, with nothing after the last step.
    Returns ``(dg, dh)``: (L, N, 3H) and (L, N, H).

    Example:
        >>> import numpy as np
        >>> from dualflow import ops
        >>> gates, hn = np.full((2, 1, 3), 0.5), np.ones((2, 1, 1))
        >>> dg, dh = ops.gru_scan_grad(gates, hn, hn, hn[0], np.ones((3, 1)), np.ones((2, 1, 1)))
        >>> dh.tolist()
        [[[1.90625]], [[1.0]]]
    """
    grads = (gh, base)
    given = tuple(g is not None for g in grads)
    present = (g for g in grads if g is not None)
    return apply(GRUScanGrad, gates, hn, hs, h0, weight_hh, *present, given=given)
