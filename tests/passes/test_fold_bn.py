"""fold_bn: inference batch norm folded into the preceding conv2d/linear (golden IR, numerics
against the unfolded graph and eager, the cases that must not fold, idempotence)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import nn, ops
from dualflow.graph_ir import Graph, interpret, parse_graph, print_graph, verify
from dualflow.passes import PASSES, run_passes
from dualflow.passes import fold_bn as fold_bn_module
from dualflow.passes.fold_bn import fold_bn
from tests.passes.programs import docstring_example, example_consts, random_args

# Folding reassociates (see fold_bn's docstring), so results agree to rounding only.
TOL = {"float64": 1e-12, "float32": 1e-5}

CONV_BN = """
graph f(%0: float32[2,3,5,5] "x") {
  state %1: float32[4,3,3,3] "w", %2: float32[4] "b", %3: float32[4] "g", %4: float32[4] "t", %5: float32[4] "m", %6: float32[4] "v"
  %7: float32[2,4,5,5] = conv2d(%0, %1) {dilation=(1, 1), groups=1, pad=(1, 1), stride=(1, 1)}  # m.py:1
  %8: float32[1,4,1,1] = reshape(%2) {shape=(1, 4, 1, 1)}  # m.py:1
  %9: float32[2,4,5,5] = add(%7, %8)  # m.py:1
  %10: float32[4] = add(%6, 1e-05)  # m.py:2
  %11: float32[4] = rsqrt(%10)  # m.py:2
  %12: float32[4] = multiply(%3, %11)  # m.py:2
  %13: float32[4] = multiply(%5, %12)  # m.py:2
  %14: float32[4] = subtract(%4, %13)  # m.py:2
  %15: float32[1,4,1,1] = reshape(%12) {shape=(1, -1, 1, 1)}  # m.py:2
  %16: float32[2,4,5,5] = multiply(%9, %15)  # m.py:2
  %17: float32[1,4,1,1] = reshape(%14) {shape=(1, -1, 1, 1)}  # m.py:2
  %18: float32[2,4,5,5] = add(%16, %17)  # m.py:2
  %19: float32[2,4,5,5] = relu(%18)  # m.py:3
  return %19
}
""".strip()  # noqa: E501 - graph text lines are as the printer writes them

CONV_BN_FOLDED = """
graph f(%0: float32[2,3,5,5] "x") {
  state %1: float32[4,3,3,3] "w", %2: float32[4] "b", %3: float32[4] "g", %4: float32[4] "t", %5: float32[4] "m", %6: float32[4] "v"
  %8: float32[1,4,1,1] = reshape(%2) {shape=(1, 4, 1, 1)}  # m.py:1
  %10: float32[4] = add(%6, 1e-05)  # m.py:2
  %11: float32[4] = rsqrt(%10)  # m.py:2
  %12: float32[4] = multiply(%3, %11)  # m.py:2
  %13: float32[4] = multiply(%5, %12)  # m.py:2
  %14: float32[4] = subtract(%4, %13)  # m.py:2
  %15: float32[1,4,1,1] = reshape(%12) {shape=(1, -1, 1, 1)}  # m.py:2
  %17: float32[1,4,1,1] = reshape(%14) {shape=(1, -1, 1, 1)}  # m.py:2
  %20: float32[4] = multiply(%2, %12)  # m.py:2
  %21: float32[4] = add(%20, %14)  # m.py:2
  %22: float32[4,1,1,1] = reshape(%12) {shape=(4, 1, 1, 1)}  # m.py:2
  %23: float32[1,4,1,1] = reshape(%21) {shape=(1, 4, 1, 1)}  # m.py:2
  %24: float32[4,3,3,3] = multiply(%1, %22)  # m.py:2
  %25: float32[2,4,5,5] = conv2d(%0, %24) {dilation=(1, 1), groups=1, pad=(1, 1), stride=(1, 1)}  # m.py:1
  %18: float32[2,4,5,5] = add(%25, %23)  # m.py:2
  %19: float32[2,4,5,5] = relu(%18)  # m.py:3
  return %19
}
""".strip()  # noqa: E501


def _state(graph: Graph, seed: int = 0) -> tuple[list, list]:
    """Random inputs and state with a positive running variance (state named "v" or last)."""
    inputs, state = random_args(graph, seed)
    return inputs, [
        np.abs(s) + 0.1 if v.name in ("v", None) else s for v, s in zip(graph.state, state)
    ]


def assert_close_run(before: Graph, after: Graph, inputs: list, state: list) -> None:
    """Both graphs agree to folding's rounding (relative to the output's scale)."""
    want, got = interpret(before, inputs, state), interpret(after, inputs, state)
    for g, w in zip(got.outputs, want.outputs):
        assert g.dtype == w.dtype and g.shape == w.shape
        scale = max(float(np.max(np.abs(w))), 1.0)
        np.testing.assert_allclose(g, w, rtol=TOL[w.dtype.name], atol=TOL[w.dtype.name] * scale)


def test_docstring_example_linear_bn1d() -> None:
    before_text, after_text = docstring_example(fold_bn_module)
    before = verify(parse_graph(before_text))
    assert print_graph(before) == before_text
    after = verify(fold_bn(before))
    assert print_graph(after) == after_text
    before = parse_graph(before_text, example_consts(before_text))
    for seed in range(3):
        assert_close_run(before, fold_bn(before), *_state(before, seed))


def test_golden_conv2d_bn() -> None:
    before = verify(parse_graph(CONV_BN))
    assert print_graph(before) == CONV_BN
    after = verify(fold_bn(before))
    assert print_graph(after) == CONV_BN_FOLDED
    for seed in range(3):
        assert_close_run(before, after, *_state(before, seed))


def test_idempotent_and_same_object_when_nothing_matches() -> None:
    graph = parse_graph(CONV_BN)
    once = fold_bn(graph)
    assert once is not graph and fold_bn(once) is once
    assert PASSES["fold_bn"] is fold_bn


def _with_text(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new)


def _with(text: str, old: str, new: str) -> Graph:
    return verify(parse_graph(_with_text(text, old, new)))


@pytest.mark.parametrize("target", ["%1", "%2", "%3", "%4", "%5", "%6"])
def test_not_folded_when_the_graph_updates_a_parameter(target: str) -> None:
    ret = "  return %19\n"
    graph = _with(CONV_BN, ret, f"{ret}  update {target} <- {target}\n")
    assert fold_bn(graph) is graph


@pytest.mark.parametrize("extra", ["%7", "%9", "%16"], ids=["conv", "bias-add", "product"])
def test_not_folded_when_an_intermediate_has_another_use(extra: str) -> None:
    graph = _with(CONV_BN, "return %19", f"return %19, {extra}")
    assert fold_bn(graph) is graph
    extra_user = f"  %20: float32[2,4,5,5] = exp({extra})\n  return %19, %20"
    graph = _with(CONV_BN, "  return %19", extra_user)
    assert fold_bn(graph) is graph


def test_not_folded_when_the_scale_depends_on_an_input() -> None:
    text = CONV_BN.replace(
        'graph f(%0: float32[2,3,5,5] "x")',
        'graph f(%0: float32[2,3,5,5] "x", %99: float32[4] "g2")',
    )
    graph = _with(text, "multiply(%3, %11)", "multiply(%99, %11)")
    assert fold_bn(graph) is graph


def test_chained_maps_and_the_fma_form_fold_in_one_run() -> None:
    graph = verify(parse_graph(CONV_BN))
    # fold leaves the multiply it fused into fma dead, and a dead use blocks folding: dce first
    folded, _ = run_passes(graph, ("fold", "dce", "fold_bn", "fold", "dce"), verify_each=True)
    assert [n.op for n in folded.nodes if n.outputs and n.outputs[0].shape == (2, 4, 5, 5)] == [
        "conv2d",
        "add",
        "relu",
    ]
    # a second batch norm right after the first: both fold into the one conv
    second = "multiply(%18, %15)  # m.py:3\n  %20: float32[2,4,5,5] = add(%19, %17)  # m.py:3"
    double = _with(_with_text(CONV_BN, "relu(%18)  # m.py:3", second), "return %19", "return %20")
    once = verify(fold_bn(double))
    assert fold_bn(once) is once
    assert [n.op for n in once.nodes if n.outputs[0].shape == (2, 4, 5, 5)] == ["conv2d", "add"]
    assert_close_run(double, once, *_state(double))


# --- traced models -------------------------------------------------------------------------


def _model(dtype: Any) -> nn.Module:
    rng = np.random.default_rng(0)
    model = nn.Sequential(
        nn.Conv2d(3, 6, 3, padding=1, dtype=dtype),
        nn.BatchNorm2d(6, dtype=dtype),
        nn.ReLU(),
        nn.Conv2d(6, 4, 3, stride=2, bias=False, dtype=dtype),
        nn.BatchNorm2d(4, dtype=dtype),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(16, 7, dtype=dtype),
        nn.BatchNorm1d(7, dtype=dtype),
    )
    for name, t in model.state_dict().items():
        if t.raw_array.dtype.kind == "f":  # non-trivial parameters and running statistics
            values = rng.normal(size=t.shape) * 0.5
            if "running_var" in name or (name.endswith(".weight") and t.ndim == 1):
                values = np.abs(values) + 0.5
            t.raw_array[...] = values.astype(t.raw_array.dtype)
    return model.eval()


def _activation_ops(graph: Graph, batch: int) -> list[str]:
    return [n.op for n in graph.nodes if n.outputs and n.outputs[0].shape[:1] == (batch,)]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_folded_model_equals_unfolded_and_eager(dtype: str) -> None:
    model, batch = _model(dtype), 5
    x = dualflow.tensor(np.random.default_rng(1).normal(size=(batch, 3, 6, 6)).astype(dtype))
    with dualflow.no_grad():
        eager = model(x).numpy()
        results, graphs = {}, {}
        for passes in ("O0", "O2"):
            fn = dualflow.compile(model, passes=passes, fallback="error")
            results[passes] = fn(x).numpy()
            graphs[passes] = fn.history[-1].graph
    tol = TOL[dtype] * max(1.0, float(np.max(np.abs(eager))))
    np.testing.assert_array_equal(results["O0"], eager)
    np.testing.assert_allclose(results["O2"], eager, rtol=TOL[dtype], atol=tol)
    # no batch-norm arithmetic is left on activations: conv/matmul, bias add, relu, reshape
    for graph in (graphs["O2"], fold_bn(graphs["O0"])):
        ops_left = _activation_ops(graph, batch)
        assert set(ops_left) <= {"conv2d", "matmul", "add", "relu", "reshape", "fused"}, ops_left
        fused = [  # on activations (the folded weights' own arithmetic may be fused)
            str(n.attrs["expr"])
            for n in graph.nodes
            if n.op == "fused" and n.outputs[0].shape[:1] == (batch,)
        ]
        assert not any("multiply" in e or "fma" in e for e in fused), fused
    assert len(_activation_ops(graphs["O2"], batch)) < len(_activation_ops(graphs["O0"], batch))
    folded = fold_bn(graphs["O0"])
    assert fold_bn(folded) is folded


def test_not_folded_in_training_mode_or_in_a_training_step() -> None:
    model, x = _model("float64").train(), np.ones((4, 3, 6, 6))
    with dualflow.no_grad():
        fn = dualflow.compile(model, passes="O0", fallback="error")
        fn(dualflow.tensor(x))
    graph = fn.history[-1].graph
    assert fold_bn(graph) is graph
    # batch norm in eval mode, but the step updates the conv/linear weights and BN parameters
    model.eval()
    params = [p for _, p in model.named_params()]

    def step(x: Any) -> Any:
        loss = ops.sum(model(x) ** 2)
        loss.backward()
        with dualflow.no_grad():
            for p in params:
                ops.assign(p, p - 0.01 * p.grad)
                p.grad = None
        return loss.detach()

    fn = dualflow.compile(step, passes="O0", fallback="error")
    fn(dualflow.tensor(x))
    graph = fn.history[-1].graph
    assert graph.updates and fold_bn(graph) is graph
