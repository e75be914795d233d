"""The value-changing rules (``passes/rules.py``, docs/passes.md) and their bounds, verified
against the kernels that apply them; every pass but fold_bn and fused sums preserves bits; the
``exact`` pipeline applies no rule.
"""

from __future__ import annotations

import numpy as np
import pytest

from dualflow.graph_ir import Graph, GraphBuilder, parse_graph, verify
from dualflow.kernels.expr.expression import compile_numpy, parse_expr
from dualflow.kernels.fused_cpu.fused_sum import cpu_sum_kernel
from dualflow.passes import PIPELINES, run_passes
from dualflow.passes.rules import RULES, sites, sum_bound, unit_roundoff
from dualflow.rule_check import check_rules
from tests.passes.test_fold_bn import CONV_BN, _state

SIZES = [4097, 65536, (1 << 20) + 7]
EXPRS = {"numba": "a * b + 0.5", "blocked": "tanh(a) * b"}  # arithmetic / transcendental kernel


def _operands(kind: str, n: int, dtype: str, rng: np.random.Generator) -> list[np.ndarray]:
    """Two operands whose products are positive, mixed, cancelling or of wide range."""
    a = {
        "positive": lambda: rng.uniform(0, 1, n),
        "mixed": lambda: rng.normal(size=n),
        "cancelling": lambda: np.where(np.arange(n) % 2, 1.0, -1.0) + rng.normal(size=n) * 1e-3,
        "wide": lambda: np.exp(rng.uniform(-20, 20, n)) * rng.choice([-1.0, 1.0], n),
    }[kind]()
    return [a.astype(dtype), rng.uniform(0.5, 2, n).astype(dtype)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kernel", sorted(EXPRS))
@pytest.mark.parametrize("kind", ["positive", "mixed", "cancelling", "wide"])
def test_fused_sum_is_within_its_bound(kind: str, kernel: str, dtype: str) -> None:
    rng = np.random.default_rng(0)
    expr = parse_expr(EXPRS[kernel], ("a", "b"))
    elements = compile_numpy(expr, ("a", "b"), ())
    for n in SIZES:
        arrays = _operands(kind, n, dtype, rng)
        metas = tuple(((n,), dtype) for _ in arrays)
        fused = cpu_sum_kernel(expr, ("a", "b"), metas)(np, *arrays)
        values = elements(np, *arrays)
        eager = np.sum(values)
        total = float(np.sum(np.abs(values), dtype=np.float64))
        diff = abs(float(fused) - float(eager))
        assert fused.dtype == eager.dtype
        assert diff <= sum_bound(n, dtype) * total, (n, diff, sum_bound(n, dtype) * total)
    # the bound stays meaningful: about 600 u sum|x| at 1M elements (measured: up to 68 u)
    assert sum_bound(SIZES[-1], dtype) < 700 * unit_roundoff(dtype)


def _linear_bn(k: int, c: int, dtype: str, bias: bool) -> Graph:
    """Eval-mode ``(x @ W [+ b]) * s + t`` as a traced linear + batch norm would give it."""
    b = GraphBuilder("lbn")
    x = b.input((16, k), dtype, "x")
    w = b.add_state((k, c), dtype, "w")
    s, t = b.add_state((c,), dtype, "s"), b.add_state((c,), dtype, "t")
    (h,) = b.node("matmul", [x, w])
    if bias:
        (h,) = b.node("add", [h, b.add_state((c,), dtype, "b")])
    (y,) = b.node("multiply", [h, s])
    (z,) = b.node("add", [y, t])
    b.output(z)
    return verify(b.build())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("k", [3, 64, 1024])
@pytest.mark.parametrize("bias", [False, True])
def test_fold_bn_is_within_its_bound(k: int, dtype: str, bias: bool) -> None:
    graph, rng = _linear_bn(k, 8, dtype, bias), np.random.default_rng(k)
    inputs = [rng.normal(size=(16, k)).astype(dtype)]
    state = [
        rng.normal(size=v.shape).astype(dtype) * (30.0 if v.name == "t" else 1.0)
        for v in graph.state
    ]
    checks = check_rules(graph, inputs, state, ("fold_bn",))
    assert [c.rules for c in checks] == [("fold_bn",)]
    assert checks[0].within and checks[0].max_abs <= checks[0].bound


def test_fold_bn_conv2d_is_within_its_bound() -> None:
    graph = verify(parse_graph(CONV_BN))
    inputs, state = _state(graph, 3)
    (check,) = check_rules(graph, inputs, state, ("fold_bn",))
    assert check.rules == ("fold_bn",) and check.within


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_chained_fold_bn_is_within_its_bound(dtype: str) -> None:
    # two affine maps after one matmul fold in one run: the second fold's core reads the first
    # fold's weight, a value neither graph holds (the rule check raised KeyError on it)
    b = GraphBuilder("lbn2")
    x = b.input((16, 32), dtype, "x")
    (h,) = b.node("matmul", [x, b.add_state((32, 8), dtype, "w")])
    for k in range(2):
        (h,) = b.node("multiply", [h, b.add_state((8,), dtype, f"s{k}")])
        (h,) = b.node("add", [h, b.add_state((8,), dtype, f"t{k}")])
    b.output(h)
    graph, rng = verify(b.build()), np.random.default_rng(5)
    inputs = [rng.normal(size=(16, 32)).astype(dtype)]
    state = [rng.normal(size=v.shape).astype(dtype) for v in graph.state]
    checks = check_rules(graph, inputs, state, ("fold_bn",))
    assert checks and all(c.rules == ("fold_bn",) and c.within for c in checks), checks
    assert [n.op for n in run_passes(graph, ("fold_bn",))[0].nodes].count("matmul") == 1


def test_only_fuse_and_fold_bn_have_rules() -> None:
    assert {p for rule in RULES.values() for p in rule.passes} == {"fuse", "fold_bn"}
    graph = _linear_bn(4, 3, "float32", True)
    for name in (
        "fold", "slice_grads", "cse", "dce", "loss_with_grad", "fuse_exact", "bucket_allreduce"
    ):  # fmt: skip
        after, _ = run_passes(graph, (name,))
        assert sites(name, graph, after) == {}


def test_exact_is_o2_without_value_changing_rules() -> None:
    exact = (
        "fold", "slice_grads", "cse", "dce", "loss_with_grad", "fuse_exact", "bucket_allreduce"
    )  # fmt: skip
    assert PIPELINES["exact"] == exact
    b = GraphBuilder("f")
    x = b.input((64, 64), "float32")
    (h,) = b.node("tanh", [x])
    (h2,) = b.node("multiply", [h, h])
    (s,) = b.node("sum", [h2], {"axis": None, "keepdims": False})
    b.output(s, h2)
    graph = b.build()
    exact, _ = run_passes(graph, "exact")
    assert [n.op for n in exact.nodes] == ["fused", "sum"]  # the elementwise pair, not the sum
    xs = [np.random.default_rng(0).normal(size=(64, 64)).astype(np.float32)]
    assert check_rules(graph, xs, [], "exact") == []  # nothing differs, no rule applies
    assert [c.rules for c in check_rules(graph, xs, [], "O2")] == []  # h2 escapes: no fused sum


def test_an_unexplained_difference_is_reported_outside_every_bound(monkeypatch) -> None:
    import dualflow.rule_check as rule_check

    real = rule_check.node_kernel

    def off_by_one_ulp(node):
        kernel = real(node)
        return lambda xp, *arrays: np.nextafter(kernel(xp, *arrays), np.inf)

    monkeypatch.setattr(rule_check, "node_kernel", off_by_one_ulp)
    b = GraphBuilder("f")
    x = b.input((64, 64), "float32")
    (h,) = b.node("exp", [x])
    (y,) = b.node("multiply", [h, 2.0])
    b.output(y)
    xs = [np.random.default_rng(0).normal(size=(64, 64)).astype(np.float32)]
    (check,) = check_rules(b.build(), xs, [], "O2")
    assert check.rules == () and not check.within and check.max_abs > 0
    assert "OUTSIDE" in str(check) and "fuse" in str(check)
