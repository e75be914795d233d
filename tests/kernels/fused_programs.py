"""The fused programs the CUDA checks render: one fusion region per elementwise op of the registry,
and every region the fusion pass makes of the op table's forward-and-gradient programs (traced).

``nvcc --ptx`` compiles them (tests/kernels/test_fused_kernels_cuda.py) and, on a GPU, cupy runs
them. Also the two chains the CPU kernel tests fuse (a transcendental one, an arithmetic one).
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import numpy as np

import dualflow
from dualflow.graph_ir import Graph, GraphBuilder
from dualflow.kernels.expr.typed_program import Program, lower_expr
from dualflow.ops import OPS
from dualflow.passes.fuse import fuse
from tests.opinfo import OP_INFOS, OpInfo

# Attribute values for the elementwise ops that take attributes (``cast`` gets the other float).
ATTRS = {"lo": -1.0, "hi": 1.0, "slope": 0.01, "alpha": 1.0}
FLOATS = ("float32", "float64")


def elementwise_ops() -> list[str]:
    """Names of the registered elementwise ops (those defined by a scalar expression)."""
    return sorted(name for name, op in OPS.items() if op.kind == "elementwise" and op.expr)


def op_graph(name: str, dtype: str, shape: tuple[int, ...] = (4, 8)) -> Graph:
    """``name(0.5 * a, 0.5 * b, ...)``: a region of at least two nodes that contains the op
    (``where`` gets its condition from ``a > 0``)."""
    op = OPS[name]
    b = GraphBuilder(f"op_{name}")
    operands = []
    for i, arg in enumerate(op.args):
        x = b.input(shape, dtype, arg)
        first = "greater" if name == "where" and i == 0 else "multiply"
        (x,) = b.node(first, [x, 0.0 if first == "greater" else 0.5])
        operands.append(x)
    attrs: dict[str, Any] = {k: ATTRS[k] for k in op.attr_names if k in ATTRS}
    if "dtype" in op.attr_names:
        attrs["dtype"] = FLOATS[1 - FLOATS.index(dtype)]
    b.output(*b.node(name, operands, attrs))
    return b.build()


class Fused(NamedTuple):
    """One fused node's expression over inputs ``args`` with their dtypes and shapes."""

    expr: tuple
    args: tuple[str, ...]
    dtypes: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    reduce: str | None = None  # "sum": the node adds up the expression's elements

    def program(self) -> Program:
        """The typed straight-line program the kernel renderers take."""
        return lower_expr(self.expr, self.args, self.dtypes)


def fused_nodes(graph: Graph) -> list[Fused]:
    """Every ``fused`` node of ``fuse(graph, min_size=0)``."""
    return [
        Fused(
            n.attrs["expr"],
            n.attrs["args"],
            tuple(v.dtype for v in n.inputs),
            tuple(tuple(v.shape) for v in n.inputs),
            n.attrs.get("reduce"),
        )
        for n in fuse(graph, min_size=0).nodes
        if n.op == "fused"
    ]


def _step(info: OpInfo, fixed: list[Any], positions: tuple[int, ...], kwargs: dict) -> Any:
    """The entry's forward and, when differentiable, the gradient of ``sum(out ** 2)``."""

    def step(*xs: dualflow.Tensor) -> tuple:
        args = list(fixed)
        for p, x in zip(positions, xs):
            args[p] = x
        out = info.fn(*args, **kwargs)
        outs = list(out) if isinstance(out, tuple | list) else [out]
        live = [o for o in outs if isinstance(o, dualflow.Tensor) and o.requires_grad]
        if live:
            loss = sum((o * o).sum() for o in live)
            outs += [g for g in dualflow.grad(loss, list(xs), allow_unused=True) if g is not None]
        return tuple(outs)

    return step


def traced_graphs(info: OpInfo, dtype: str) -> list[Graph]:
    """The graphs ``dualflow.compile`` traces for the entry's first sample in ``dtype`` (folded,
    deduplicated, not fused); none when the entry cannot be traced (data-dependent shapes)."""
    sample = info.samples(np.random.default_rng(0))[0]
    fixed = [
        np.asarray(v, dtype) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v
        for v in sample.inputs
    ]
    positions: tuple[int, ...] = ()
    if info.differentiable:
        floats = [
            i for i, v in enumerate(fixed) if isinstance(v, np.ndarray) and v.dtype.kind == "f"
        ]
        positions = tuple(floats) if sample.grad is None else sample.grad
    step = _step(info, fixed, positions, sample.kwargs)
    compiled = dualflow.compile(step, fallback="error", passes=("fold", "cse", "dce"))
    leaves = [dualflow.tensor(fixed[p], requires_grad=True) for p in positions]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled(*leaves)
    except dualflow.errors.TracingError:
        return []
    return [trace.graph for trace in compiled.history]


def all_fused(dtype: str) -> dict[str, list[Fused]]:
    """Fused nodes by origin (``op:<name>`` per elementwise op, ``table:<entry>`` per traced
    op-table entry that fused anything), float inputs in ``dtype``."""
    found = {f"op:{name}": fused_nodes(op_graph(name, dtype)) for name in elementwise_ops()}
    for info in OP_INFOS:
        nodes = [f for g in traced_graphs(info, dtype) for f in fused_nodes(g)]
        if nodes:
            found[f"table:{info.name}"] = nodes
    return found


def tanh_chain(
    shape: tuple[int, ...], bshape: tuple[int, ...] | None = None, dtype: str = "float32"
) -> Graph:
    """``tanh(x*0.5+1)*sigmoid(x) - x**2`` (+ y when ``bshape`` is given)."""
    b = GraphBuilder("tanh_chain")
    x = b.input(shape, dtype, "x")
    (h,) = b.node("multiply", [x, 0.5])
    (h,) = b.node("add", [h, 1])
    (t,) = b.node("tanh", [h])
    (s,) = b.node("sigmoid", [x])
    (p,) = b.node("multiply", [t, s])
    (q,) = b.node("power", [x, 2])
    (r,) = b.node("subtract", [p, q])
    if bshape is not None:
        (r,) = b.node("add", [r, b.input(bshape, dtype, "y")])
    b.output(r)
    return b.build()


def arith_chain(shape: tuple[int, ...], dtype: str, bshape: tuple[int, ...] | None) -> Graph:
    """``max((x*0.5+1)*(x*x-3)/(x*x+1) - x*0.25, 0)`` (+ y): arithmetic only."""
    b = GraphBuilder("arith_chain")
    x = b.input(shape, dtype, "x")
    (a,) = b.node("multiply", [x, 0.5])
    (a,) = b.node("add", [a, 1])
    (sq,) = b.node("multiply", [x, x])
    (n,) = b.node("subtract", [sq, 3.0])
    (d,) = b.node("add", [sq, 1.0])
    (a,) = b.node("multiply", [a, n])
    (a,) = b.node("divide", [a, d])
    (c,) = b.node("multiply", [x, 0.25])
    (a,) = b.node("subtract", [a, c])
    (a,) = b.node("maximum", [a, 0])
    if bshape is not None:
        (a,) = b.node("where", [*b.node("greater", [a, 0.1]), a, b.input(bshape, dtype, "y")])
    b.output(a)
    return b.build()
