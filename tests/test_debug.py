"""compare_modes: a small MLP step matches; an injected wrong fusion is blamed on ``fuse`` and
reported outside every rule's bound; a fused sum's difference is a rule within its bound; a
wrong backward graph is caught at every order setting."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from dualflow import debug, ops
from dualflow.debug import Report, compare_modes
from dualflow.graph_ir.ir import Graph
from dualflow.passes import manager


def _mlp(x, w1, b1, w2, b2):
    h = ops.relu(ops.linear(x, w1, b1))  # 64 x 64 = 4096 elements: large enough to fuse
    h = (h * 0.5 + 1.0).tanh()
    return ops.linear(h, w2, b2)


def _args() -> tuple:
    rng = np.random.default_rng(0)
    shapes = [(64, 16), (64, 16), (64,), (4, 64), (4,)]
    return tuple((rng.normal(size=s) * 0.3).astype(np.float32) for s in shapes)


def _swap_add(expr):
    if expr[0] != "call":
        return expr
    name = "subtract" if expr[1] == "add" else expr[1]
    return ("call", name, *(_swap_add(e) for e in expr[2:]))


def test_mlp_step_matches() -> None:
    report = compare_modes(_mlp, *_args(), orders=(0, 1))
    assert isinstance(report, Report) and report.ok, str(report)
    assert report.culprit_pass is None and "modes match" in str(report)


def test_injected_wrong_fusion_is_blamed_on_fuse(monkeypatch: pytest.MonkeyPatch) -> None:
    real = manager.PASSES["fuse"]

    def broken(graph: Graph) -> Graph:
        fused = real(graph)
        nodes = tuple(
            n.__class__(
                n.op, n.inputs, n.outputs, {**n.attrs, "expr": _swap_add(n.attrs["expr"])}, n.loc
            )
            if n.op == "fused"
            else n
            for n in fused.nodes
        )
        return fused.replace(nodes=nodes)

    monkeypatch.setitem(manager.PASSES, "fuse", broken)
    report = compare_modes(_mlp, *_args(), orders=(0,))
    assert not report.ok and report.max_abs > 1e-3
    assert report.culprit_pass == "fuse", str(report)
    assert report.culprit_node is not None and report.culprit_node.startswith("fused"), str(report)
    assert "test_debug.py" in report.culprit_node
    assert "culprit pass: fuse" in str(report)
    # no documented rule explains the fused node's difference: a bug, not rounding
    assert report.within_rules is False
    (culprit,) = report.culprit_rules
    assert culprit.rules == () and not culprit.within and culprit.stage == "fuse"
    assert "a bug, not rounding" in str(report)


def test_a_fused_sum_difference_is_a_rule_within_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(debug.TOLERANCES, "float32", (1e-12, 1e-12))  # any rounding mismatches
    x = np.random.default_rng(0).normal(size=(256, 256)).astype(np.float32)

    def energy(t):
        return ((t * 0.5 + 1.0) * t).sum()  # one fused node adding in float64 at O2

    report = compare_modes(energy, x, orders=(0,))
    assert not report.ok
    assert [c.rules for c in report.rules] == [("fused_sum",)] and report.within_rules
    assert 0 < report.rules[0].max_abs <= report.rules[0].bound
    assert "within its bound (rounding)" in str(report) and "fused_sum" in str(report)


def test_a_wrong_backward_graph_is_caught_with_second_order_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # orders (0, 1, 2) once took order 1 from an eager replay (create_graph), so a compiled
    # backward plan was never compared
    def break_backward(graph):
        if not graph.name.endswith("_backward"):
            return graph
        nodes = tuple(
            replace(n, op="multiply", attrs={}) if n.op == "tanh_grad" else n for n in graph.nodes
        )
        return graph.replace(nodes=nodes)

    monkeypatch.setitem(manager.PASSES, "break_backward", break_backward)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 4)).astype(np.float32)
    w = rng.normal(size=(4, 3)).astype(np.float32)

    def f(x, w):
        return ops.matmul(x, w).tanh()

    for orders in ((0, 1), (0, 1, 2)):
        report = compare_modes(f, x, w, orders=orders, passes=("break_backward",))
        assert not report.ok and report.worst.startswith("order 1"), (orders, report)
        assert report.culprit_pass == "break_backward"
        node = report.culprit_node or ""
        assert node.startswith("multiply -> ") and node.endswith("(backward graph)"), node
        assert "test_debug.py:" in node  # the user line of the tanh the gradient belongs to
    assert compare_modes(f, x, w, orders=(0, 1, 2)).ok
