"""Recurrent ops: ``lstm_scan``, a whole LSTM layer's recurrence over a sequence as one op.

Written with per-step ops, an LSTM layer is ~15 small ops per time step forward and more
backward, and every ``xw[t]`` slice's gradient is a zero-filled array of the whole sequence
(quadratic in its length). As one op, the forward is a loop of one GEMM and a few numpy calls per
step (feature-major: W_hh @ h, BLAS's fast shape for a small batch) that also returns the
activated gates (as PyTorch's fused LSTM saves them); the backward
is one recurrence op (``lstm_scan_grad``) that computes its elementwise factors step by step
from them (one small GEMM each) and gives the input projections' gradient as one stacked
array and ``weight_hh``'s as one GEMM. The backward is written with ops and accounts for
gradients reaching the gates output too, so it is differentiable again (double backward) and
traces like any other.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.errors import ShapeError
from dualflow.kernels.linalg.lstm_forward import fits, lstm_forward
from dualflow.ops.dispatch import apply
from dualflow.ops.indexing import getitem
from dualflow.ops.join import stack
from dualflow.ops.linalg import matmul
from dualflow.ops.recurrent_grad import gate_blocks, lstm_scan_grad, previous_states
from dualflow.ops.registry import OPS, Meta, primitive
from dualflow.ops.shape import reshape, transpose
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


def _cell(xp: Any, act: Any, c: Any, h_out: Any, c_out: Any) -> None:
    """One step in the feature-major layout: pre-activations ``act`` (4H, N) [i, f, g, o]
    activated in place, then ``c_out = σ(f) c + σ(i) tanh(g)``, ``h_out = σ(o) tanh(c_out)``."""
    hidden = c.shape[0]
    g = act[2 * hidden : 3 * hidden]
    tanh_g = OPS["tanh"].forward(xp, g)
    act[...] = OPS["sigmoid"].forward(xp, act)  # the ops' own rounding (g's quarter rewritten)
    g[...] = tanh_g
    xp.multiply(act[hidden : 2 * hidden], c, out=c_out)
    c_out += act[:hidden] * g
    xp.multiply(act[3 * hidden :], OPS["tanh"].forward(xp, c_out), out=h_out)


def _feature_major(a: Any) -> Any:
    # (L, N, F) <-> (L, F, N), C-ordered (a fresh copy)
    return a.transpose(0, 2, 1).copy()


def _scan_scratch(metas: tuple, attrs: dict) -> int:
    # the feature-major states and gates and one step's product, freed when the outputs are made
    (xw, dtype), *_ = metas
    steps, n, four_h = xw
    elements = steps * four_h * n + 2 * steps * (four_h // 4) * n + four_h * n
    return elements * np.dtype(dtype).itemsize


@primitive(
    "lstm_scan",
    saves=("x1", "x2", "x3", "y0", "y1", "y2"),
    nout=3,
    aliasing="fresh",
    scratch=_scan_scratch,
)
class LSTMScan:
    """An LSTM layer's recurrence: every step's hidden and cell state (L, N, H) each and its
    activated gates (L, N, 4H) [σi, σf, tanh g, σo] (what the backward reads), from the input
    projections ``xw`` (L, N, 4H) (biases included), ``h0``, ``c0`` and ``weight_hh``."""

    def infer(xw: Meta, h0: Meta, c0: Meta, w_hh: Meta) -> tuple[Meta, Meta, Meta]:
        steps, n, hidden = _check(xw, h0, c0, w_hh)
        dtype = np.result_type(*(np.dtype(m.dtype) for m in (xw, h0, c0, w_hh)))
        state = Meta((steps, n, hidden), dtype)
        return state, state, Meta((steps, n, 4 * hidden), dtype)

    def forward(xp, xw, h0, c0, w_hh):
        # Feature-major inside: W_hh (4H, H) @ h (H, N) is BLAS's fast shape (M = 4H; h (N, H)
        # @ W_hh^T with M = N = 16 rows ran at half the rate), and each gate is a row block.
        steps, n, hidden = xw.shape[0], xw.shape[1], w_hh.shape[1]
        dtype = np.result_type(xw.dtype, h0.dtype, c0.dtype, w_hh.dtype)
        if fits(xp, dtype):  # one numba cell step per step, no sequence transposes; same bits
            return lstm_forward(xw, h0, c0, w_hh)
        acts = _feature_major(xw.astype(dtype, copy=False))  # becomes the gates, step by step
        hs, cs = xp.empty((steps, hidden, n), dtype), xp.empty((steps, hidden, n), dtype)
        product = xp.empty((4 * hidden, n), dtype)
        h, c = h0.T, c0.T
        for t in range(steps):
            xp.matmul(w_hh, h, out=product)
            acts[t] += product
            _cell(xp, acts[t], c, hs[t], cs[t])
            h, c = hs[t], cs[t]
        return _feature_major(hs), _feature_major(cs), _feature_major(acts)

    def backward(ctx, ghs, gcs, gacts):
        h0, c0, w_hh, hs, cs, acts = ctx.x1, ctx.x2, ctx.x3, ctx.y0, ctx.y1, ctx.y2
        # sizes from the node, not the saved arrays: in a trace with a dynamic length they are
        # expressions there, while a saved array's own shape is the traced call's numbers
        steps, n, four_h = ctx.in_shapes[0]
        sizes = (steps, n, four_h // 4)
        return _scan_backward(h0, c0, w_hh, (hs, cs, acts), (ghs, gcs, gacts), sizes)


def _slopes(acts: Any, sizes: tuple) -> Any:
    # d(activated gates)/d(pre-activations) (L, N, 4, H): only for gradients reaching the gates
    # output (an LSTM layer drops them, and eager mode would compute them for nothing)
    i, f, g, o = gate_blocks(acts, sizes)
    return stack([i * (1.0 - i), f * (1.0 - f), 1.0 - g * g, o * (1.0 - o)], 2)


def _scan_backward(h0: Any, c0: Any, w_hh: Any, outs: tuple, grads: tuple, sizes: tuple) -> tuple:
    (hs, cs, acts), (ghs, gcs, gacts) = outs, grads
    steps, n, hidden = sizes
    gates = (steps, n, 4 * hidden)
    base = None
    if gacts is not None:
        base = reshape(reshape(gacts, (steps, n, 4, hidden)) * _slopes(acts, sizes), gates)
    # the recurrence is one op that computes its factors per step from the saved gates and
    # cells: the graph's node count does not depend on the length, and absent gradients stay
    # None (no zeros)
    gx, _, dcs = lstm_scan_grad(acts, cs, c0, w_hh, ghs, gcs, base)
    h_prev = reshape(previous_states(h0, hs), (steps * n, hidden))
    gw = matmul(transpose(reshape(gx, (steps * n, 4 * hidden))), h_prev)  # one GEMM
    f0 = getitem(gate_blocks(acts, sizes)[1], 0)
    return gx, matmul(getitem(gx, 0), w_hh), getitem(dcs, 0) * f0, gw


def lstm_scan(xw: Any, h0: Any, c0: Any, weight_hh: Any) -> tuple[Any, Any, Any]:
    """Every step's hidden and cell state of one LSTM layer (gates [i, f, g, o]), and its
    activated gates.

    ``xw`` (L, N, 4H) holds each step's input projection ``x W_ih^T + b_ih + b_hh``; step t
    computes ``gates = xw[t] + h W_hh^T``, ``c = σ(f) c + σ(i) tanh(g)``, ``h = σ(o) tanh(c)``.
    Returns ``(hs, cs, gates)``: (L, N, H), (L, N, H) and (L, N, 4H) [σi, σf, tanh g, σo].

    Example:
        >>> import numpy as np
        >>> from dualflow import ops
        >>> hs, cs, _ = ops.lstm_scan(np.zeros((3, 1, 8)), np.zeros((1, 2)), np.ones((1, 2)),
        ...                        np.zeros((8, 2)))
        >>> hs.shape, [round(v, 4) for v in cs.tolist()[0][0]]
        ((3, 1, 2), [0.5, 0.5])
    """
    require_same_float("lstm_scan", xw, weight_hh, "xw", "weight_hh")
    return apply(LSTMScan, xw, h0, c0, weight_hh)
