"""``lstm_scan_grad`` and ``gru_scan_grad``: the recurrences of ``lstm_scan``'s and
``gru_scan``'s backwards as one op each.

Written with ops, the backward recurrence is a few ops per time step, so a compiled step's
backward graph grows with the sequence length (hundreds of plan steps) and a trace with a
dynamic length serves only its own length. As one op its node count does not depend on L: the
forward runs one fused numba step and one GEMM per time step
(``kernels/linalg/recurrence.py``), eagerly and in plans alike. The op is linear in its first
three inputs and its own backward (the adjoint recurrence, forward in time) is written with
ops, so double backward stays exact; it is the only place that still loops over steps with ops.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.errors import ShapeError
from dualflow.kernels.linalg.recurrence import gru_grad_recurrence, lstm_grad_recurrence
from dualflow.ops.creation import zeros_like
from dualflow.ops.dispatch import apply
from dualflow.ops.indexing import getitem
from dualflow.ops.join import concat, stack
from dualflow.ops.linalg import matmul
from dualflow.ops.reduction import sum as reduce_sum
from dualflow.ops.registry import Meta, primitive
from dualflow.ops.shape import expand_dims, reshape, transpose

NAMES = ("gh", "gc", "base", "p", "q", "k", "f", "weight_hh")


def _check(metas: tuple) -> tuple[int, int, int]:
    gh, w = metas[0], metas[7]
    if len(gh.shape) != 3 or len(w.shape) != 2:
        raise ShapeError(
            f"lstm_scan_grad: expected gh (L, N, H) and weight_hh (4H, H), got "
            f"{tuple(gh.shape)} and {tuple(w.shape)}"
        )
    steps, n, hidden = gh.shape
    state, gates, three = (steps, n, hidden), (steps, n, 4 * hidden), (steps, n, 3 * hidden)
    wanted = (state, state, gates, three, state, state, state, (4 * hidden, hidden))
    if any(tuple(m.shape) != s for m, s in zip(metas, wanted)):
        got = ", ".join(f"{name} {tuple(m.shape)}" for name, m in zip(NAMES, metas))
        raise ShapeError(
            f"lstm_scan_grad: {got} do not fit (L, N, H) x2, (L, N, 4H), (L, N, 3H), "
            "(L, N, H) x3, (4H, H)"
        )
    return steps, n, hidden


def _grad_scratch(metas: tuple, attrs: dict) -> int:
    # the two (N, H) carries between steps
    (gh, dtype), *_ = metas
    return 2 * gh[1] * gh[2] * np.dtype(dtype).itemsize


@primitive(
    "lstm_scan_grad",
    saves=("x3", "x4", "x5", "x6", "x7", "y0", "y1", "y2"),
    nout=3,
    aliasing="fresh",
    scratch=_grad_scratch,
)
class LSTMScanGrad:
    """The backward recurrence of an LSTM layer: each step's gate gradients (L, N, 4H) and the
    dh and dc (L, N, H) it reached, from the per-step coefficients (see ``lstm_scan_grad``)."""

    def infer(*metas: Meta) -> tuple[Meta, Meta, Meta]:
        steps, n, hidden = _check(metas)
        dtype = np.result_type(*(np.dtype(m.dtype) for m in metas))
        return Meta((steps, n, 4 * hidden), dtype), *[Meta((steps, n, hidden), dtype)] * 2

    def forward(xp, gh, gc, base, p, q, k, f, w_hh):
        ins = (gh, gc, base, p, q, k, f, w_hh)
        return lstm_grad_recurrence(xp, ins, np.result_type(*(a.dtype for a in ins)))

    def backward(ctx, gdg, gdh, gdc):
        outs = (ctx.y0, ctx.y1, ctx.y2)
        cots = tuple(zeros_like(y) if g is None else g for g, y in zip((gdg, gdh, gdc), outs))
        coefficients = tuple(ctx.input(i) for i in range(3, 8))
        return _adjoint(coefficients, outs, cots, ctx.in_shapes[0])  # sizes as in lstm_scan


def _adjoint(coefficients: tuple, outs: tuple, cots: tuple, sizes: tuple) -> tuple:
    """The vjp of the recurrence: its adjoint runs forward in time (step t's gate gradients
    fed step t-1's dh through ``@ weight_hh``, its dc through ``* f``)."""
    (p, q, k, f, w), (dg, dh, dc), (ug, uh, uc) = coefficients, outs, cots
    steps, n, hidden = sizes
    p3, w_t = reshape(p, (steps, n, 3, hidden)), transpose(w)
    ifg, last = (slice(None), slice(None), slice(0, 3)), (slice(None), slice(None), 3)
    lgs, lcs, lhs = [], [], []
    for t in range(steps):
        lg = getitem(ug, t)
        if t:
            lg = lg + matmul(lhs[-1], w_t)
        lg4 = reshape(lg, (n, 4, hidden))
        lc = reduce_sum(getitem(lg4, ifg[1:]) * getitem(p3, t), axis=1) + getitem(uc, t)
        if t:
            lc = lc + lcs[-1] * getitem(f, t)
        lh = getitem(lg4, last[1:]) * getitem(q, t) + lc * getitem(k, t) + getitem(uh, t)
        lgs.append(lg)
        lcs.append(lc)
        lhs.append(lh)
    lg, lc, lh = stack(lgs, 0), stack(lcs, 0), stack(lhs, 0)
    lg4 = reshape(lg, (steps, n, 4, hidden))
    gp = reshape(getitem(lg4, ifg) * expand_dims(dc, 2), (steps, n, 3 * hidden))
    gq = getitem(lg4, last) * dh
    lc_before = concat([expand_dims(zeros_like(lcs[0]), 0), getitem(lc, slice(None, -1))], 0)
    later = reshape(getitem(dg, slice(1, None)), ((steps - 1) * n, 4 * hidden))
    earlier = reshape(getitem(lh, slice(None, -1)), ((steps - 1) * n, hidden))
    gw = matmul(transpose(later), earlier)  # step t's dg met step t-1's dh: one GEMM
    return lh, lc, lg, gp, gq, lc * dh, lc_before * dc, gw


def lstm_scan_grad(
    gh: Any, gc: Any, base: Any, p: Any, q: Any, k: Any, f: Any, weight_hh: Any
) -> tuple[Any, Any, Any]:
    """The dh/dc recurrence of an LSTM layer's backward (``lstm_scan``'s), last step first.

    Step t: ``dh_t = gh_t + dg_{t+1} @ weight_hh``, ``dc_t = gc_t + dc_{t+1} f_{t+1} + dh_t k_t``,
    ``dg_t = [dc_t p_t, dh_t q_t] + base_t`` (dc_t times each of p_t's three H-blocks, the i, f
    and g gates, and dh_t times q_t, the o gate), with nothing after the last step. ``gh``/``gc``
    are the gradients reaching each step's h and c, ``base`` the gate gradients that need no
    recurrence, ``p`` (L, N, 3H) the i/f/g gate gradients per unit of dc, ``q`` (L, N, H) the
    o gate's per unit of dh, ``k`` dc per unit of dh and ``f`` the forget gates. Returns
    ``(dg, dh, dc)``: (L, N, 4H), (L, N, H), (L, N, H).

    Example:
        >>> import numpy as np
        >>> from dualflow import ops
        >>> ones, zeros4 = np.ones((2, 1, 1)), np.zeros((2, 1, 4))
        >>> dg, dh, dc = ops.lstm_scan_grad(ones, ones, zeros4, np.ones((2, 1, 3)), 0 * ones,
        ...                                 ones, ones, np.ones((4, 1)))
        >>> dh.tolist(), dc.tolist()
        ([[[7.0]], [[1.0]]], [[[10.0]], [[2.0]]])
    """
    return apply(LSTMScanGrad, gh, gc, base, p, q, k, f, weight_hh)


def _gru_check(gh: Meta, q: Meta, base: Meta, z: Meta, w: Meta) -> tuple[int, int, int]:
    if len(gh.shape) != 3 or len(w.shape) != 2:
        raise ShapeError(
            f"gru_scan_grad: expected gh (L, N, H) and weight_hh (3H, H), got "
            f"{tuple(gh.shape)} and {tuple(w.shape)}"
        )
    steps, n, hidden = gh.shape
    state, gates = (steps, n, hidden), (steps, n, 3 * hidden)
    metas = (gh, q, base, z, w)
    if any(tuple(m.shape) != s for m, s in zip(metas, (state, gates, gates, state))) or tuple(
        w.shape
    ) != (3 * hidden, hidden):
        got = ", ".join(
            f"{name} {tuple(m.shape)}"
            for name, m in zip(("gh", "q", "base", "z", "weight_hh"), metas)
        )
        raise ShapeError(
            f"gru_scan_grad: {got} do not fit (L, N, H), (L, N, 3H) x2, (L, N, H), (3H, H)"
        )
    return steps, n, hidden


@primitive(
    "gru_scan_grad",
    saves=("x1", "x3", "x4", "y0", "y1"),
    nout=2,
    aliasing="fresh",
    scratch=_grad_scratch,
)
class GRUScanGrad:
    """The backward recurrence of a GRU layer: each step's hidden-projection gradients
    (L, N, 3H) and the dh (L, N, H) it reached (see ``gru_scan_grad``)."""

    def infer(gh: Meta, q: Meta, base: Meta, z: Meta, w: Meta) -> tuple[Meta, Meta]:
        steps, n, hidden = _gru_check(gh, q, base, z, w)
        dtype = np.result_type(*(np.dtype(m.dtype) for m in (gh, q, base, z, w)))
        return Meta((steps, n, 3 * hidden), dtype), Meta((steps, n, hidden), dtype)

    def forward(xp, gh, q, base, z, w_hh):
        ins = (gh, q, base, z, w_hh)
        return gru_grad_recurrence(xp, ins, np.result_type(*(a.dtype for a in ins)))

    def backward(ctx, gdg, gdh):
        outs = (ctx.y0, ctx.y1)
        cots = tuple(zeros_like(y) if g is None else g for g, y in zip((gdg, gdh), outs))
        q, z, w = ctx.x1, ctx.x3, ctx.x4
        return _gru_adjoint((q, z, w), outs, cots, ctx.in_shapes[0])


def _gru_adjoint(coefficients: tuple, outs: tuple, cots: tuple, sizes: tuple) -> tuple:
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


def gru_scan_grad(gh: Any, q: Any, base: Any, z: Any, weight_hh: Any) -> tuple[Any, Any]:
    """The dh recurrence of a GRU layer's backward (``gru_scan``'s), last step first.

    Step t: ``dh_t = gh_t + dg_{t+1} @ weight_hh + dh_{t+1} z_{t+1}``, ``dg_t = dh_t q_t +
    base_t`` (dh_t times each of the three H-blocks of q_t), with nothing after the last step.
    ``gh`` is the gradient reaching each step's h, ``q`` the hidden projection's gradient per
    unit of dh, ``base`` the part that needs no recurrence, ``z`` the update gates. Returns
    ``(dg, dh)``: (L, N, 3H) and (L, N, H).

    Example:
        >>> import numpy as np
        >>> from dualflow import ops
        >>> ones = np.ones((2, 1, 1))
        >>> dg, dh = ops.gru_scan_grad(ones, np.ones((2, 1, 3)), np.zeros((2, 1, 3)), ones,
        ...                            np.ones((3, 1)))
        >>> dh.tolist()
        [[[5.0]], [[1.0]]]
    """
    return apply(GRUScanGrad, gh, q, base, z, weight_hh)
