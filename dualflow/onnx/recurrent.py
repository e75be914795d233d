"""The ONNX converters of ``lstm_scan`` and ``gru_scan``: the recurrences unrolled into ONNX's
own ops.

ONNX's ``LSTM``/``GRU`` ops project their input themselves and return only the last states,
while the scans take the projections and return every step's states and gates: each step is
emitted as ``MatMul``/``Add``/``Split``/``Sigmoid``/``Tanh``/``Mul``, the same math as the op.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.graph_ir.ir import Node
from dualflow.onnx.capture import ExportError


def _step(em: Any, gates: str, c: str, hidden: int) -> tuple[str, str, str]:
    i, f, g, o = em.emit("Split", [gates, em.ints([hidden] * 4)], 4, axis=-1)
    i, f, o = (em.one("Sigmoid", [v]) for v in (i, f, o))
    g = em.one("Tanh", [g])
    c = em.one("Add", [em.one("Mul", [f, c]), em.one("Mul", [i, g])])
    return em.one("Mul", [o, em.one("Tanh", [c])]), c, em.one("Concat", [i, f, g, o], axis=-1)


def convert_lstm_scan(em: Any, node: Node) -> list[str]:
    """Emit every step of ``node``'s recurrence; returns the stacked hidden and cell states and
    activated gates."""
    xw, h0, c0, w_hh = node.inputs
    if 0 in em.dynamic(xw):
        raise ExportError("its sequence length is a dynamic axis; export with a static length")
    steps, hidden = xw.shape[0], w_hh.shape[1]
    w_t = em.one("Transpose", [em.name(w_hh)], perm=[1, 0])
    h, c, stacks = em.name(h0), em.name(c0), ([], [], [])
    for t in range(steps):
        x_t = em.one("Gather", [em.name(xw), em.const(np.asarray(t, np.int64))], axis=0)
        h, c, acts = _step(em, em.one("Add", [x_t, em.one("MatMul", [h, w_t])]), c, hidden)
        for stacked, value in zip(stacks, (h, c, acts)):
            stacked.append(em.one("Unsqueeze", [value, em.ints([0])]))
    return [em.one("Concat", stacked, axis=0) for stacked in stacks]


def _gru_step(em: Any, x_t: str, hw: str, h: str, hidden: int) -> tuple[str, str, str]:
    x_r, x_z, x_n = em.emit("Split", [x_t, em.ints([hidden] * 3)], 3, axis=-1)
    h_r, h_z, h_n = em.emit("Split", [hw, em.ints([hidden] * 3)], 3, axis=-1)
    r = em.one("Sigmoid", [em.one("Add", [x_r, h_r])])
    z = em.one("Sigmoid", [em.one("Add", [x_z, h_z])])
    n = em.one("Tanh", [em.one("Add", [x_n, em.one("Mul", [r, h_n])])])
    h = em.one("Add", [n, em.one("Mul", [z, em.one("Sub", [h, n])])])
    return h, em.one("Concat", [r, z, n], axis=-1), h_n


def convert_gru_scan(em: Any, node: Node) -> list[str]:
    """Emit every step of ``node``'s GRU recurrence; returns the stacked hidden states, gates
    and n-gate hidden projections."""
    xw, h0, w_hh, b_hh = node.inputs
    if 0 in em.dynamic(xw):
        raise ExportError("its sequence length is a dynamic axis; export with a static length")
    steps, hidden = xw.shape[0], w_hh.shape[1]
    w_t = em.one("Transpose", [em.name(w_hh)], perm=[1, 0])
    h, stacks = em.name(h0), ([], [], [])
    for t in range(steps):
        x_t = em.one("Gather", [em.name(xw), em.const(np.asarray(t, np.int64))], axis=0)
        hw = em.one("Add", [em.one("MatMul", [h, w_t]), em.name(b_hh)])
        h, gates, h_n = _gru_step(em, x_t, hw, h, hidden)
        for stacked, value in zip(stacks, (h, gates, h_n)):
            stacked.append(em.one("Unsqueeze", [value, em.ints([0])]))
    return [em.one("Concat", stacked, axis=0) for stacked in stacks]
