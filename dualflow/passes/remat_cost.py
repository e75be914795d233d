"""What recomputing one node costs, for the ``remat`` search: its time on the machine expressed
in FLOPs, so a convolution's arithmetic and a batch norm's memory traffic compare on one scale.

A node whose op states its work (``flops``: matmul, the convolutions) costs that many FLOPs; any
other node (elementwise, shape, normalization) is bound by memory, and costs the bytes it moves
times ``balance()``, the FLOPs the CPU does in the time it moves one byte. Pricing such ops at one
operation per element (as before) made a batch norm look 1000x cheaper than a convolution of the
same size; measured on this machine's CPU it is about 9x cheaper (the numbers below), and a
search that recomputed 48 batch norms to spare two convolutions was slower than one that did not.
"""

from __future__ import annotations

import math

from dualflow.graph_ir.ir import Node
from dualflow.kernels.base.machine_constants import machine_constants
from dualflow.ops.registry import OPS


def balance() -> int:
    """FLOPs the CPU does in the time it moves one byte: its one-thread float32 GEMM rate over
    its one-thread copy bandwidth (``kernels.base.machine_constants``; 6 on the 2-core
    development machine as a constant, measured 3 there). Measured once per machine and kept in
    the kernels cache, not at each compile: the same graph gets the same plan in every process
    of a machine (the plan cache stores it); only the ratio between op kinds matters to the
    search.

    Example:
        >>> balance() >= 1
        True
    """
    return machine_constants().balance


# Passes over its input an op makes beyond one read and one write, where the kernel makes more
# (batch norm: the mean, then the variance, then the normalization; measured 8.0 ms for a 16 MiB
# float32 input against 71 ms for a 3x3 convolution of 64 channels on it, 2 shared cores).
EXTRA_PASSES = {"batch_norm": 3}


def node_flops(node: Node) -> int:
    """The op's ``flops`` fact, else one operation per output element (what ``explain`` reports
    as extra FLOPs).

    Example:
        >>> from dualflow.graph_ir.ir import Value
        >>> x = Value(0, (2, 3), "float32")
        >>> node_flops(Node("exp", (x,), (Value(1, (2, 3), "float32"),)))
        6
    """
    op = OPS.get(node.op)
    if op is not None and op.flops is not None:
        return int(op.flops(node.input_metas, node.attrs))
    return sum(math.prod(v.shape) for v in node.outputs)


def node_cost(node: Node) -> int:
    """What running ``node`` once more costs, in FLOPs of time: its ``flops`` fact, else the
    bytes it reads and writes (with the extra passes its kernel makes) times ``balance()``; a view
    costs nothing.

    Example:
        >>> from dualflow.graph_ir.ir import Value
        >>> x = Value(0, (1024,), "float32")
        >>> node_cost(Node("exp", (x,), (Value(1, (1024,), "float32"),))) == balance() * 8192
        True
    """
    op = OPS.get(node.op)
    if op is not None and op.flops is not None:
        return int(op.flops(node.input_metas, node.attrs))
    if op is not None and op.aliasing == "view":
        return 0  # a view moves no bytes
    read = sum(v.nbytes for v in node.value_inputs)
    written = sum(v.nbytes for v in node.outputs)
    largest = max((v.nbytes for v in node.value_inputs), default=0)
    return balance() * (read + written + EXTRA_PASSES.get(node.op, 0) * largest)
