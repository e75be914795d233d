"""The ONNX converter of ``lstm_scan``: the recurrence unrolled into ONNX's own ops.

ONNX's ``LSTM`` op projects its input itself and returns only the last cell state, while
``lstm_scan`` takes the projections and returns every step's states and gates: each step is
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
