"""``gru_scan``: a whole GRU layer's recurrence over a sequence as one op (PyTorch's GRU).

As ``lstm_scan`` does for the LSTM: the forward is a loop of one GEMM and a few numpy calls per
step (feature-major: W_hh @ h, BLAS's fast shape for a small batch) returning every step's
hidden state, gates [r, z, n] and hidden projection of the n gate (``W_hn h + b_hn``, which r
multiplies, as in PyTorch); the backward's dh recurrence is one op (``gru_scan_grad``) that
computes its factors step by step from those saved arrays, so the backward graph's node count
does not depend on the sequence length.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.errors import ShapeError
from dualflow.kernels.linalg.gru_forward import gru_forward
from dualflow.kernels.linalg.lstm_forward import fits
from dualflow.ops.dispatch import apply
from dualflow.ops.indexing import getitem
from dualflow.ops.join import concat, stack
from dualflow.ops.linalg import matmul
from dualflow.ops.recurrent_grad import previous_states
from dualflow.ops.recurrent_gru_grad import gate_blocks, gru_factors, gru_scan_grad
from dualflow.ops.reduction import sum as reduce_sum
from dualflow.ops.registry import OPS, Meta, primitive
from dualflow.ops.shape import reshape, transpose
from dualflow.ops.validate import require_same_float


def _check(xw: Meta, h0: Meta, w_hh: Meta, b_hh: Meta) -> tuple[int, int, int]:
    if len(xw.shape) != 3 or len(w_hh.shape) != 2 or w_hh.shape[0] != 3 * w_hh.shape[1]:
        raise ShapeError(
            f"gru_scan: expected xw (L, N, 3H) and weight_hh (3H, H), got {tuple(xw.shape)} "
            f"and {tuple(w_hh.shape)}"
        )
    steps, n, three_h = xw.shape
    hidden = w_hh.shape[1]
    if three_h != 3 * hidden or tuple(h0.shape) != (n, hidden) or tuple(b_hh.shape) != (three_h,):
        raise ShapeError(
            f"gru_scan: xw {tuple(xw.shape)}, h0 {tuple(h0.shape)}, weight_hh "
            f"{tuple(w_hh.shape)} and bias_hh {tuple(b_hh.shape)} do not fit (L, N, 3H), (N, H), "
            "(3H, H), (3H,)"
        )
    return steps, n, hidden


def _cell(xp: Any, act: Any, product: Any, h: Any, h_out: Any) -> None:
    """One step, feature-major: ``act`` (3H, N) holds x's projections and becomes the gates
    [r, z, n]; ``product`` (3H, N) = W_hh h + b_hh; ``h_out = n + z (h - n)``."""
    hidden = h.shape[0]
    rz = act[: 2 * hidden]
    rz += product[: 2 * hidden]
    rz[...] = OPS["sigmoid"].forward(xp, rz)  # the ops' own rounding, as the cell's ops
    r, z, gate_n = act[:hidden], act[hidden : 2 * hidden], act[2 * hidden :]
    gate_n += r * product[2 * hidden :]
    gate_n[...] = OPS["tanh"].forward(xp, gate_n)
    xp.add(gate_n, z * (h - gate_n), out=h_out)


def _feature_major(a: Any) -> Any:
    # (L, N, F) <-> (L, F, N), C-ordered (a fresh copy)
    return a.transpose(0, 2, 1).copy()


def _scan_scratch(metas: tuple, attrs: dict) -> int:
    # the feature-major gates, states and n-projections and one step's product
    (xw, dtype), *_ = metas
    steps, n, three_h = xw
    elements = steps * three_h * n + 2 * steps * (three_h // 3) * n + three_h * n
    return elements * np.dtype(dtype).itemsize


@primitive(
    "gru_scan",
    saves=("x1", "x2", "y0", "y1", "y2"),
    nout=3,
    aliasing="fresh",
    scratch=_scan_scratch,
)
class GRUScan:
    """A GRU layer's recurrence: every step's hidden state (L, N, H), its gates (L, N, 3H)
    [r, z, n] and ``W_hn h + b_hn`` (L, N, H), from the input projections ``xw`` (L, N, 3H)
    (``x W_ih^T + b_ih``), ``h0``, ``weight_hh`` and ``bias_hh``."""

    def infer(xw: Meta, h0: Meta, w_hh: Meta, b_hh: Meta) -> tuple[Meta, Meta, Meta]:
        steps, n, hidden = _check(xw, h0, w_hh, b_hh)
        dtype = np.result_type(*(np.dtype(m.dtype) for m in (xw, h0, w_hh, b_hh)))
        state = Meta((steps, n, hidden), dtype)
        return state, Meta((steps, n, 3 * hidden), dtype), state

    def forward(xp, xw, h0, w_hh, b_hh):
        steps, n, hidden = xw.shape[0], xw.shape[1], w_hh.shape[1]
        dtype = np.result_type(xw.dtype, h0.dtype, w_hh.dtype, b_hh.dtype)
        if fits(xp, dtype):  # one numba cell step per step, no sequence transposes; same bits
            return gru_forward(xw, h0, w_hh, b_hh)
        acts = _feature_major(xw.astype(dtype, copy=False))  # becomes the gates, step by step
        hs, hn = xp.empty((steps, hidden, n), dtype), xp.empty((steps, hidden, n), dtype)
        product = xp.empty((3 * hidden, n), dtype)
        bias = b_hh.astype(dtype, copy=False)[:, None]
        h = h0.T.astype(dtype, copy=False)
        for t in range(steps):
            xp.matmul(w_hh, h, out=product)
            product += bias
            hn[t] = product[2 * hidden :]
            _cell(xp, acts[t], product, h, hs[t])
            h = hs[t]
        return _feature_major(hs), _feature_major(acts), _feature_major(hn)

    def backward(ctx, ghs, ggates, ghn):
        steps, n, three_h = ctx.in_shapes[0]  # sizes from the node (expressions in a trace)
        sizes = (steps, n, three_h // 3)
        saved = (ctx.x1, ctx.x2, ctx.y0, ctx.y1, ctx.y2)
        return _scan_backward(saved, (ghs, ggates, ghn), sizes)


def _base(gates: Any, hn: Any, grads: tuple, sizes: tuple) -> tuple:
    """The hidden projection's gradient that needs no recurrence (L, N, 3, H) and the x
    projection n block's (``from_n``), from the gradients reaching the gates and hn (only when
    some do: an RNN layer drops them, and eager mode would compute them for nothing)."""
    r, z, g_n = gate_blocks(gates, sizes)
    ggates, ghn = grads
    gr, gz, gn = (c * 0.0 for c in (r, z, g_n)) if ggates is None else gate_blocks(ggates, sizes)
    slope_n, slope_r, slope_z = 1.0 - g_n * g_n, r * (1.0 - r), z * (1.0 - z)
    from_n = gn * slope_n
    ghn = hn * 0.0 if ghn is None else ghn
    base = stack([(from_n * hn + gr) * slope_r, gz * slope_z, from_n * r + ghn], 2)
    return base, from_n


def _scan_backward(saved: tuple, grads: tuple, sizes: tuple) -> tuple:
    h0, w_hh, hs, gates, hn = saved
    ghs, ggates, ghn = grads
    steps, n, hidden = sizes
    flat = (steps, n, 3 * hidden)
    base = from_n = None
    if ggates is not None or ghn is not None:
        base, from_n = _base(gates, hn, (ggates, ghn), sizes)
        base = reshape(base, flat)
    # the dh recurrence is one op computing its factors per step from the saved arrays: the
    # graph's node count does not depend on the length, and absent gradients stay None
    dg, dh = gru_scan_grad(gates, hn, hs, h0, w_hh, ghs, base)
    h_prev = previous_states(h0, hs)
    per_n = gru_factors(gates, hn, h_prev, sizes)[3]
    dx_n = dh * per_n if from_n is None else dh * per_n + from_n
    dx = concat([getitem(dg, (slice(None), slice(None), slice(0, 2 * hidden))), dx_n], 2)
    dh0 = getitem(dh, 0) * getitem(gate_blocks(gates, sizes)[1], 0) + matmul(getitem(dg, 0), w_hh)
    rows = reshape(dg, (steps * n, 3 * hidden))
    gw = matmul(transpose(rows), reshape(h_prev, (steps * n, hidden)))  # one GEMM
    return dx, dh0, gw, reduce_sum(rows, axis=0)


def gru_scan(xw: Any, h0: Any, weight_hh: Any, bias_hh: Any) -> tuple[Any, Any, Any]:
    """Every step's hidden state of one GRU layer (gates [r, z, n], PyTorch's), its gates and
    the n gate's hidden projection.

    ``xw`` (L, N, 3H) holds each step's input projection ``x W_ih^T + b_ih``; step t computes
    ``hw = h W_hh^T + b_hh``, ``r = σ(xw_r + hw_r)``, ``z = σ(xw_z + hw_z)``,
    ``n = tanh(xw_n + r hw_n)``, ``h = n + z (h - n)``. Returns ``(hs, gates, hn)``: (L, N, H),
    (L, N, 3H) [r, z, n] and (L, N, H) (``hw_n`` of each step).

    Example:
        >>> import numpy as np
        >>> from dualflow import ops
        >>> hs, gates, _ = ops.gru_scan(np.zeros((2, 1, 3)), np.ones((1, 1)), np.zeros((3, 1)),
        ...                             np.zeros(3))
        >>> hs.tolist(), gates.tolist()[0]
        ([[[0.5]], [[0.25]]], [[0.5, 0.5, 0.0]])
    """
    require_same_float("gru_scan", xw, weight_hh, "xw", "weight_hh")
    return apply(GRUScan, xw, h0, weight_hh, bias_hh)
