"""The synthetic ops ``guard`` and ``fused`` are registered op definitions: their forward is what
the reference interpreter runs, their facts are what passes and the runtime ask, and their node
form is checked by ``verify`` (they have no public function, so no op-table entry).
"""

from __future__ import annotations

import numpy as np
import pytest

from dualflow.graph_ir import GraphBuilder, interpret
from dualflow.graph_ir.ir import Node, Value
from dualflow.graph_ir.verify import GraphVerifyError, verify
from dualflow.ops import FUSED, GUARD, OPS, Meta
from dualflow.passes.fuse import fuse
from dualflow.runtime import lower
from dualflow.runtime.out_forward import inplace_inputs, writes_out


@pytest.mark.parametrize(
    "value, expect, kind, holds",
    [
        (np.array(True), True, "bool", True),
        (np.array(3), 3, "int", True),
        (np.array(2.5, np.float32), 2.0, "float", False),
        (np.array(np.nan), float("nan"), "float", True),  # a NaN guard holds for NaN
        (np.array([[7]]), 7, "item", True),
    ],
)
def test_guard_forward_checks_the_speculation(value, expect, kind, holds) -> None:
    assert GUARD.forward(np, value, expect=expect, kind=kind) is holds
    assert GUARD.infer(Meta(value.shape, value.dtype), expect=expect, kind=kind) == ()


def test_guard_facts_and_form() -> None:
    assert OPS["guard"] is GUARD and GUARD.guard and GUARD.impure and GUARD.kind == "synthetic"
    b = GraphBuilder("g")
    x = b.input((), "float32")
    b.guard(x, 1.0, "float")
    b.output(x)
    graph = b.build()
    assert graph.guards == graph.nodes and verify(graph) is graph
    bad = graph.replace(nodes=(Node("guard", (x,), (), {"expect": 1.0, "kind": "nope"}),))
    with pytest.raises(GraphVerifyError, match="a guard takes one value"):
        verify(bad)
    assert interpret(graph, [np.float32(2.0)]).failed_guards == list(graph.nodes)
    assert lower(graph).run([np.float32(2.0)], []).failed_guard is graph.nodes[0]


def _fused_graph(reduce: bool = False):
    b = GraphBuilder("f")
    x = b.input((64, 64), "float32")
    (h,) = b.node("multiply", [x, 0.5])
    (h,) = b.node("add", [h, 1.0])
    if reduce:
        (h,) = b.node("sum", [h], {"axis": None, "keepdims": True})
    b.output(h)
    return fuse(b.build())


@pytest.mark.parametrize("reduce", [False, True])
def test_fused_forward_infer_and_kernel_agree(reduce: bool) -> None:
    graph = _fused_graph(reduce)
    (node,) = graph.nodes
    assert node.op == FUSED.name and FUSED.region and FUSED.aliasing == "fresh"
    x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    want = np.asarray(x * np.float32(0.5) + np.float32(1.0))
    if reduce:
        want = want.sum(keepdims=True)
    reference = FUSED.forward(np, x, **node.attrs)
    (meta,) = FUSED.infer(Meta(x.shape, x.dtype), **node.attrs)
    out = node.outputs[0]
    assert (tuple(meta.shape), np.dtype(meta.dtype).name) == (out.shape, out.dtype)
    np.testing.assert_allclose(reference, want, rtol=1e-5)
    np.testing.assert_allclose(lower(graph).run([x], []).outputs[0], want, rtol=1e-5)
    assert writes_out(node)  # its kernel takes out=
    assert inplace_inputs(node) == (() if reduce else node.inputs)


def test_fused_form_is_checked() -> None:
    graph = _fused_graph()
    (node,) = graph.nodes
    attrs = {**node.attrs, "expr": ("call", "__import__", ("const", 1))}
    bad = graph.replace(nodes=(Node("fused", node.inputs, node.outputs, attrs, node.loc),))
    with pytest.raises(GraphVerifyError, match="fused node: bad expression"):
        verify(bad)


def test_op_facts_replace_op_names() -> None:
    """What the planner, layout analysis and overlap pass ask instead of names."""
    assert OPS["matmul"].layout == "C" and OPS["matmul"].inplace_for({}, 2) == ()
    assert OPS["add"].inplace_for({}, 2) == (0, 1) and OPS["add"].out_forward() is not None
    assert OPS["erf"].out_forward() is None  # erf is no ufunc: it allocates
    assert OPS["assign"].state_write and OPS["assign"].aliasing == "view"
    assert OPS["allreduce"].split == ("allreduce_start", "allreduce_wait", "allreduce_progress")
    roles = {OPS[name].async_role for name in OPS["allreduce"].split}
    assert roles == {"start", "wait", "progress"}
    assert OPS["debug_print"].prints and OPS["transpose"].layout == "permute"
    assert not OPS["maximum"].commutative and OPS["add"].commutative  # bits, not values
    assert OPS["stop_gradient"].passthrough and not OPS["transpose"].passthrough
    x = Value(0, (2,), "float32")
    assert not writes_out(Node("sum", (x,), (Value(1, (), "float32"),), {"axis": None}))
