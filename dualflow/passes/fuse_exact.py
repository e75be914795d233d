"""fuse_exact: fusion without its value-changing rule, for the bit-identical ``exact`` pipeline.

``fuse`` without trailing sums (a fused sum adds in float64 where eager adds in the element
type: ``passes/rules.py``'s ``fused_sum``): every fused kernel then computes eager's bits (numba
only for exactly rounded arithmetic, the blocked evaluator running eager's ufuncs otherwise).
"""

from __future__ import annotations

from dualflow.device import Device
from dualflow.graph_ir.ir import Graph
from dualflow.passes.fuse import fuse


def fuse_exact(graph: Graph, device: Device | str = "cpu") -> Graph:
    """``fuse`` without trailing sums; ``graph`` itself when nothing fuses.

    Example:
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((64, 64), "float32")
        >>> (h,) = b.node("multiply", [x, x])
        >>> b.output(*b.node("sum", [h], {"axis": None, "keepdims": False}))
        >>> g = b.build(); [n.op for n in fuse(g).nodes], fuse_exact(g) is g
        (['fused'], True)
    """
    return fuse(graph, sums=False, device=device)
