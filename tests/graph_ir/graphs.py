"""Hand-built graphs shared by the graph_ir and runtime tests (built with ``GraphBuilder`` only,
so the eager machinery is not involved).
"""

from __future__ import annotations

import numpy as np

from dualflow.graph_ir import Graph, GraphBuilder


def everything() -> Graph:
    """A valid graph with state, a const, literals, tuple/None/negative/inf/str attrs, a
    multi-output node, a guard and an update."""
    b = GraphBuilder("everything")
    x = b.input((2, 4), "float64", "x")
    labels = b.input((2,), "int64", "labels")
    w = b.add_state((4,), "float64", "w")
    c = b.const(np.array([1.0, -2.0, 0.5, 3.0]), "c")
    (sliced,) = b.node(
        "getitem", [x], {"index": ((1, None, None), None, (None, None, -1))}, "m.py:1"
    )
    (rows,) = b.node("sum", [x], {"axis": -1, "keepdims": False}, "m.py:2")
    (total,) = b.node("sum", [rows], {"axis": None, "keepdims": False}, "m.py:3")
    (inf,) = b.node("full", [], {"shape": (2,), "value": float("-inf"), "dtype": "float64"})
    (low,) = b.node("maximum", [rows, inf])
    (loss,) = b.node("softmax_cross_entropy", [x, labels], {"ignore_label": -1, "reduce": "sum"})
    (xt,) = b.node("transpose", [x], {"axes": (1, 0)}, "m.py:7")
    y, mean, var = b.node("batch_norm", [x, w, c], {"eps": 1e-5}, "m.py:8")
    b.guard(total, 4.0, "float", "m.py:9")
    (scaled,) = b.node("multiply", [x, c])
    (shifted,) = b.node("add", [scaled, -2.5])
    (new_w,) = b.node("add", [w, mean])
    b.update(w, new_w)
    b.output(sliced, low, loss, xt, y, var, shifted)
    return b.build()


def everything_inputs() -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Inputs and state for ``everything`` that pass its guard (the sum of x is 4)."""
    x = np.arange(8.0).reshape(2, 4) / 7.0
    return [x, np.array([1, 3])], [np.array([0.5, 1.0, 1.5, 2.0])]


def chain(n: int, size: int, name: str = "chain") -> Graph:
    """``n`` alternating exp/negative nodes on one float64 vector of ``size`` elements."""
    b = GraphBuilder(name)
    (v,) = (b.input((size,), "float64", "x"),)
    for i in range(n):
        (v,) = b.node("negative" if i % 2 else "tanh", [v])
    b.output(v)
    return b.build()
