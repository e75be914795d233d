"""``lstm_scan_grad``: the recurrence of ``lstm_scan``'s backward as one op (``gru_scan``'s is
``recurrent_gru_grad``), computing its per-step factors from the forward's saved arrays.

Written with ops, the backward recurrence is a few ops per time step, so a compiled step's
backward graph grows with the sequence length (hundreds of plan steps) and a trace with a
dynamic length serves only its own length. As one op its node count does not depend on L: the
forward runs one fused numba step (the factors, dh, dc, the gate gradients) and one GEMM per
time step (``kernels/linalg/recurrence.py``), eagerly and in plans alike. The op is linear in
the incoming gradients; its own backward (the adjoint recurrence, forward in time, chained
through the factors) is written with ops, so double backward stays exact; it is the only
place that still loops over steps with ops.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.errors import ShapeError
from dualflow.kernels.linalg.recurrence import lstm_grad_recurrence
from dualflow.ops.activation import tanh
from dualflow.ops.creation import zeros_like
from dualflow.ops.dispatch import apply
from dualflow.ops.indexing import getitem
from dualflow.ops.join import concat, stack
from dualflow.ops.linalg import matmul
from dualflow.ops.reduction import sum as reduce_sum
from dualflow.ops.registry import OPS, Meta, primitive
from dualflow.ops.shape import expand_dims, reshape, transpose

SAVED = ("acts", "cs", "c0", "weight_hh")
GRADS = ("gh", "gc", "base")


def _check(metas: tuple, given: tuple) -> tuple[int, int, int]:
    given_count("lstm_scan_grad", metas, given, SAVED, GRADS)
    cs, w = metas[1], metas[3]
    if len(cs.shape) != 3 or len(w.shape) != 2:
        raise ShapeError(
            f"lstm_scan_grad: expected cs (L, N, H) and weight_hh (4H, H), got "
            f"{tuple(cs.shape)} and {tuple(w.shape)}"
        )
    steps, n, hidden = cs.shape
    state, gates = (steps, n, hidden), (steps, n, 4 * hidden)
    saved = (gates, state, (n, hidden), (4 * hidden, hidden))
    layout = "acts (L, N, 4H), cs (L, N, H), c0 (N, H), weight_hh (4H, H), gh and gc (L, N, H), "
    layout += "base (L, N, 4H)"
    wanted = zip(SAVED + GRADS, saved + (state, state, gates))
    given_shapes("lstm_scan_grad", metas, given, wanted, layout)
    return steps, n, hidden


def given_count(op: str, metas: tuple, given: tuple, saved: tuple, grads: tuple) -> None:
    """ShapeError unless ``given`` flags each of ``grads`` and ``metas`` holds the ``saved``
    arrays and then the flagged gradients (a recurrence-gradient op's inputs).

    Example:
        >>> given_count("op", (1, 2, 3), (True, False), ("a", "b"), ("g", "h"))
    """
    if len(given) != len(grads) or len(metas) != len(saved) + sum(map(bool, given)):
        raise ShapeError(
            f"{op}: given {given} must flag which of {', '.join(grads)} follow the "
            f"{len(saved)} saved arrays, got {len(metas)} inputs"
        )


def given_shapes(op: str, metas: tuple, given: tuple, wanted: Any, layout: str = "") -> None:
    """ShapeError unless ``metas`` (the saved arrays, then the gradients ``given`` flags) have
    the shapes ``wanted`` pairs with their names, saved arrays first; ``layout`` names them all.

    Example:
        >>> from dualflow.ops.registry import Meta
        >>> given_shapes("op", (Meta((2,), "f"),), (False,), [("a", (2,)), ("g", (3,))])
    """
    wanted = list(wanted)
    saved = len(metas) - sum(map(bool, given))
    named = wanted[:saved] + [w for w, g in zip(wanted[saved:], given) if g]
    if any(tuple(m.shape) != shape for m, (_, shape) in zip(metas, named)):
        got = ", ".join(f"{name} {tuple(m.shape)}" for m, (name, _) in zip(metas, named))
        raise ShapeError(f"{op}: {got} do not fit {layout}")


def _grad_scratch(metas: tuple, attrs: dict) -> int:
    # the two carries between steps and a step's tanh(c) (N, H) each, weight_hh transposed
    _, (state, dtype), *_ = metas
    n, hidden = state[1], state[2]
    return (3 * n * hidden + 4 * hidden * hidden) * np.dtype(dtype).itemsize


@primitive(
    "lstm_scan_grad",
    saves=("x0", "x1", "x2", "x3", "y0", "y1", "y2"),
    nout=3,
    aliasing="fresh",
    scratch=_grad_scratch,
)
class LSTMScanGrad:
    """The backward recurrence of an LSTM layer from its forward's saved gates and cells: each
    step's gate gradients (L, N, 4H) and the dh and dc (L, N, H) it reached (see
    ``lstm_scan_grad``); ``given`` flags which of the gradients gh, gc, base follow."""

    def infer(*metas: Meta, given: tuple) -> tuple[Meta, Meta, Meta]:
        steps, n, hidden = _check(metas, given)
        dtype = np.result_type(*(np.dtype(m.dtype) for m in metas))
        return Meta((steps, n, 4 * hidden), dtype), *[Meta((steps, n, hidden), dtype)] * 2

    def forward(xp, acts, cs, c0, w_hh, *grads, given):
        dtype = np.result_type(acts, cs, c0, w_hh, *grads)
        present = iter(grads)
        full = tuple(next(present) if g else None for g in given)
        return lstm_grad_recurrence(xp, (acts, cs, c0, w_hh), full, dtype, OPS["tanh"].forward)

    def backward(ctx, gdg, gdh, gdc):
        outs = (ctx.y0, ctx.y1, ctx.y2)
        cots = tuple(zeros_like(y) if g is None else g for g, y in zip((gdg, gdh, gdc), outs))
        acts, cs, c0, w = ctx.x0, ctx.x1, ctx.x2, ctx.x3
        steps, n, four_h = ctx.in_shapes[0]  # sizes as in lstm_scan
        sizes = (steps, n, four_h // 4)
        per_dc, per_dh, dc_per_dh, f = _factors(acts, previous_states(c0, cs), cs, sizes)
        per_dc = reshape(per_dc, (steps, n, 3 * sizes[2]))
        coefficients = (per_dc, per_dh, dc_per_dh, f, w)
        lh, lc, lg, *by_factor, gw = _adjoint(coefficients, outs, cots, sizes)
        g_acts, g_cs, g_c0 = _factors_vjp(acts, c0, cs, by_factor, sizes)
        present = tuple(g for g, flag in zip((lh, lc, lg), ctx.attrs["given"]) if flag)
        return g_acts, g_cs, g_c0, gw, *present


def previous_states(first: Any, states: Any) -> Any:
    """(L, N, H): the state each step starts from (``first``, then every step's but the last).

    Example:
        >>> import numpy as np
        >>> previous_states(np.zeros((1, 1)), np.ones((3, 1, 1))).numpy()[:, 0, 0].tolist()
        [0.0, 1.0, 1.0]
    """
    return concat([expand_dims(first, 0), getitem(states, slice(None, -1))], 0)


def gate_blocks(acts: Any, sizes: tuple) -> tuple:
    """The four (L, N, H) gate blocks [i, f, g, o] of (L, N, 4H) gates, as views.

    Example:
        >>> import numpy as np
        >>> [b.item() for b in gate_blocks(np.arange(4.0).reshape(1, 1, 4), (1, 1, 1))]
        [0.0, 1.0, 2.0, 3.0]
    """
    gates = reshape(acts, (*sizes[:2], 4, sizes[2]))
    return tuple(getitem(gates, (slice(None), slice(None), k)) for k in range(4))


def _factors(acts: Any, c_prev: Any, cs: Any, sizes: tuple) -> tuple:
    """The backward's coefficients on whole sequences, with ops (the step kernel computes the
    same per step; only double backward needs them whole): d(pre-activation gates i, f, g) per
    unit of dc (L, N, 3, H), d(pre-activation o) per unit of dh, dc per unit of dh, and σf."""
    i, f, g, o = gate_blocks(acts, sizes)
    tc = tanh(cs)
    per_dc = stack([g * i * (1.0 - i), c_prev * f * (1.0 - f), i * (1.0 - g * g)], 2)
    return per_dc, tc * o * (1.0 - o), o * (1.0 - tc * tc), f


def _factors_vjp(acts: Any, c0: Any, cs: Any, by_factor: list, sizes: tuple) -> tuple:
    """The vjp of ``_factors`` w.r.t. the gates, the cells and c0, from the gradients reaching
    its four results (``by_factor``: per_dc (L, N, 3H), per_dh, dc_per_dh, f)."""
    g_per_dc, g_per_dh, g_dc_per_dh, g_f = by_factor
    steps, n, hidden = sizes
    i, f, g, o = gate_blocks(acts, sizes)
    gpi, gpf, gpg = (getitem(reshape(g_per_dc, (steps, n, 3, hidden)), (
        slice(None), slice(None), k)) for k in range(3))  # fmt: skip
    tc = tanh(cs)
    d_i = gpi * (g * (1.0 - 2.0 * i)) + gpg * (1.0 - g * g)
    d_f = gpf * (previous_states(c0, cs) * (1.0 - 2.0 * f)) + g_f
    d_g = gpi * (i * (1.0 - i)) - gpg * (2.0 * i * g)
    d_o = g_per_dh * (tc * (1.0 - 2.0 * o)) + g_dc_per_dh * (1.0 - tc * tc)
    d_tc = g_per_dh * (o * (1.0 - o)) - g_dc_per_dh * (2.0 * o * tc)
    d_c_prev = gpf * (f * (1.0 - f))  # step t's c_prev is c_{t-1} (c0 at t = 0)
    later = concat([getitem(d_c_prev, slice(1, None)), zeros_like(getitem(d_c_prev, slice(0, 1)))])
    g_acts = reshape(stack([d_i, d_f, d_g, d_o], 2), (steps, n, 4 * hidden))
    return g_acts, d_tc * (1.0 - tc * tc) + later, getitem(d_c_prev, 0)


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
    acts: Any, cs: Any, c0: Any, weight_hh: Any, gh: Any = None, gc: Any = None, base: Any = None
) -> tuple[Any, Any, Any]:
    """The backward recurrence of an LSTM layer (``lstm_scan``'s), last step first, from the
    forward's saved activated gates ``acts`` (L, N, 4H) [σi, σf, tanh g, σo], cells ``cs``
    (L, N, H), first cell ``c0`` (N, H) and ``weight_hh`` (4H, H).

    ``gh``/``gc`` (L, N, H) are the gradients reaching each step's h and c and ``base``
    (L, N, 4H) the gate gradients that need no recurrence; None where absent (no zeros are
    made). Step t, with ``tc = tanh(c_t)`` and ``c_prev`` the c it started from: ``dh_t = gh_t +
    dg_{t+1} @ weight_hh``, ``dc_t = gc_t + dc_{t+1} f_{t+1} + dh_t o (1 - tc²)``, ``dg_t =
    [dc_t g i (1 - i), dc_t c_prev f (1 - f), dc_t i (1 - g²), dh_t tc o (1 - o)] + base_t``,
    with nothing after the last step. Returns ``(dg, dh, dc)``: (L, N, 4H), (L, N, H),
    (L, N, H).

    Example:
        >>> import numpy as np
        >>> from dualflow import ops
        >>> acts, cs = np.full((2, 1, 4), 0.5), np.zeros((2, 1, 1))
        >>> dg, dh, dc = ops.lstm_scan_grad(acts, cs, cs[0], np.ones((4, 1)), np.ones((2, 1, 1)))
        >>> dh.tolist(), dc.tolist()
        ([[[1.25]], [[1.0]]], [[[0.875]], [[0.5]]])
    """
    grads = (gh, gc, base)
    given = tuple(g is not None for g in grads)
    present = (g for g in grads if g is not None)
    return apply(LSTMScanGrad, acts, cs, c0, weight_hh, *present, given=given)
