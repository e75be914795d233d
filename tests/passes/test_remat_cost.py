"""``remat``'s cost model: recomputing a node costs its time in FLOPs, so at one size a 3x3
convolution costs far more than a batch norm, which costs more than an elementwise step (the
order measured on the CPU: 71 ms, 8.0 ms, 2.1 ms for ResNet-18's first stage at batch 64), and a
view costs nothing."""

from __future__ import annotations

from dualflow.graph_ir import parse_graph
from dualflow.passes.remat_cost import balance, node_cost, node_flops

LAYER1 = (
    (
        'graph f(%0: float32[64,64,32,32] "x", %1: float32[64,64,3,3] "w", %2: float32[64] "g", '
        '%3: float32[64] "b") {'
    )
    + """
  %4: float32[64,64,32,32] = conv2d(%0, %1) {dilation=(1, 1), groups=1, pad=(1, 1), stride=(1, 1)}
  %5: float32[64,64,32,32], %6: float32[64], %7: float32[64] = batch_norm(%4, %2, %3) {eps=1e-05}
  %8: float32[64,64,32,32] = maximum(%5, 0.0)
  %9: float32[64,65536] = reshape(%8) {shape=(64, -1)}
  return %9, %6, %7
}"""
)


def test_layer1_ops_rank_as_measured_and_views_are_free() -> None:
    conv, bn, relu, view = parse_graph(LAYER1).nodes
    costs = [node_cost(n) for n in (conv, bn, relu, view)]
    assert costs[0] == node_flops(conv) == 2 * 64 * 64 * 32 * 32 * 64 * 9  # its flops fact
    assert costs[0] > 5 * costs[1] > 0  # measured 8.9x on the CPU
    assert costs[1] > 2 * costs[2] > 0  # measured 3.8x
    assert balance() == 6  # the suite's fixed constants (tests/conftest.py)
    assert costs[2] == balance() * 2 * relu.outputs[0].nbytes  # one read, one write
    assert costs[3] == 0
    assert node_flops(bn) == 64 * 64 * 32 * 32 + 2 * 64  # explain's count: one per element
