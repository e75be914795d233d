"""Golden before/after tests: each pass's docstring example, and O1/O2 on small programs."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from dualflow.graph_ir import Graph, interpret, parse_graph, print_graph, verify
from dualflow.passes import O2, PASSES, run_passes
from tests.passes.programs import (
    assert_same_run,
    docstring_example,
    dropout_graph,
    example_consts,
    mlp_step,
    random_args,
    softmax_xent,
)

MLP_O2 = """
graph mlp(%0: float32[4,3] "x", %1: int64[4] "t") {
  state %2: float32[3,5] "w1", %3: float32[5,2] "w2"
  const %4: float32[] "lr"
  %5: float32[4,5] = matmul(%0, %2)  # m.py:1
  %6: float32[4,5] = relu(%5)  # m.py:2
  %8: float32[4,2] = matmul(%6, %3)  # m.py:4
  %10: float32[] = softmax_cross_entropy(%8, %1) {ignore_label=-1, reduce='mean'}
  %12: float32[] = sum(%8) {axis=None, keepdims=False}
  guard(%12) {expect=0.0, kind='float'}  # m.py:8
  %13: float32[3,5] = multiply(%2, %4)  # m.py:9
  %14: float32[3,5] = subtract(%2, %13)  # m.py:10
  return %10, %8
  update %2 <- %14
}
"""

# The reshape pair stays: ``logits`` may arrive F-ordered, and then the first reshape copies it
# into C order where ``reshape(%8, (4, 3))`` would be ``%8`` itself, summed in another order.
XENT_O2 = """
graph xent(%0: float64[4,3] "logits") {
  const %1: float64[4,3] "onehot"
  const %14: float64[]
  %2: float64[4,1] = max(%0) {axis=1, keepdims=True}  # x.py:1
  %3: float64[4,3] = subtract(%0, %2)  # x.py:2
  %4: float64[4,3] = exp(%3)  # x.py:3
  %5: float64[4,1] = sum(%4) {axis=1, keepdims=True}  # x.py:4
  %6: float64[4,1] = log(%5)  # x.py:5
  %8: float64[4,3] = subtract(%3, %6)  # x.py:7
  %9: float64[12] = reshape(%8) {shape=(12,)}  # x.py:8
  %10: float64[4,3] = reshape(%9) {shape=(4, 3)}  # x.py:9
  %11: float64[4,3] = multiply(%1, %10)  # x.py:10
  %12: float64[] = sum(%11) {axis=None, keepdims=False}  # x.py:11
  %13: float64[] = negative(%12)  # x.py:12
  %15: float64[] = divide(%13, %14)  # x.py:14
  return %15
}
"""

DROPOUT_O2 = """
graph dropout(%0: float32[6] "x") {
  state %1: uint64[2] "key"
  %2: float32[6] = dropout_mask(%1) {dtype='float32', ratio=0.5, shape=(6,)}  # d.py:1
  %3: float32[6] = dropout_mask(%1) {dtype='float32', ratio=0.5, shape=(6,)}  # d.py:2
  %4: float32[6] = dropout_mask(%1) {dtype='float32', ratio=0.5, shape=(6,)}  # d.py:3
  %5: float32[6] = multiply(%0, %2)
  %6: float32[6] = multiply(%0, %3)
  %7: float32[] = sum(%5) {axis=None, keepdims=False}
  guard(%7) {expect=1.0, kind='float'}  # d.py:4
  guard(%7) {expect=1.0, kind='float'}  # d.py:4
  return %5, %6
  update %1 <- %1
}
"""


@pytest.mark.parametrize("name", ["dce", "cse", "fold"])
def test_docstring_example(name: str) -> None:
    module = importlib.import_module(f"dualflow.passes.{name}")
    before_text, after_text = docstring_example(module)
    before = verify(parse_graph(before_text))
    assert print_graph(before) == before_text  # the example is canonical text
    after = verify(PASSES[name](before))
    assert print_graph(after) == after_text
    # with random (distinct) constants the rewrite still computes the same thing
    consts = example_consts(before_text)
    before = parse_graph(before_text, consts)
    assert_same_run(before, PASSES[name](before), *random_args(before))


@pytest.mark.parametrize(
    "build, expected",
    [(mlp_step, MLP_O2), (softmax_xent, XENT_O2), (dropout_graph, DROPOUT_O2)],
    ids=["mlp", "softmax-xent", "dropout"],
)
def test_o2_on_small_programs(build, expected: str) -> None:
    graph: Graph = build()
    out, stats = run_passes(graph, "O2", verify_each=True)
    assert print_graph(out) == expected.strip()
    assert [s.name for s in stats] == list(O2)
    for seed in range(3):
        assert_same_run(graph, out, *random_args(graph, seed))


def test_o1_merges_the_duplicated_logits() -> None:
    out, _ = run_passes(softmax_xent(), "O1", verify_each=True)
    assert "x.py:6" not in print_graph(out)
    assert "subtract(%3, %6)  # x.py:7" in print_graph(out)


def test_fold_rules_each() -> None:
    text = """
graph r(%0: float32[2,3] "x", %1: float32[2,3] "y") {
  %2: float32[2,3] = tanh(%0)
  %3: float32[2,3] = add(-0.0, %2)
  %4: float32[2,3] = subtract(%3, 0.0)
  %5: float32[2,3] = divide(%4, 1)
  %6: float32[2,3] = cast(%5) {dtype='float32'}
  %7: float32[2,3] = stop_gradient(%6)
  %8: float32[2,3] = reshape(%7) {shape=(2, 3)}
  %9: float32[3,2] = transpose(%8) {axes=None}
  %10: float32[2,3] = transpose(%9) {axes=(-1, 0)}
  %11: float32[2,3] = multiply(1, %10)
  %12: float32[2,3] = negative(%11)
  %13: float32[2,3] = negative(%12)
  %14: float32[2,3] = multiply(%1, %13)
  %15: float32[2,3] = add(%1, %14)  # r.py:1
  return %15
}"""
    graph = parse_graph(text)
    out, _ = run_passes(graph, ("fold", "dce"), verify_each=True)
    assert [n.op for n in out.nodes] == ["tanh", "fma"]
    tanh = out.nodes[0].outputs[0]
    assert out.nodes[1].inputs == (graph.inputs[1], tanh, graph.inputs[1])
    assert out.nodes[1].loc == "r.py:1"
    assert_same_run(graph, out, *random_args(graph))


@pytest.mark.parametrize(
    "lines",
    [
        ["%2: float32[2,3] = add(%1, 0.0)"],  # -0.0 + 0.0 is 0.0: the sign bit would change
        ["%2: float32[2,3] = add(0, %1)"],
        ["%2: float32[2,3] = subtract(%1, -0.0)"],
        ["%2: float32[2,3] = multiply(%0, 1.0)"],  # x may be strided: x * 1 is a dense copy
        ["%2: float32[2,3] = negative(%0)", "%3: float32[2,3] = negative(%2)"],
        [
            "%2: float32[6] = reshape(%1) {shape=(6,)}",
            "%3: float32[3,2] = reshape(%2) {shape=(3, 2)}",
        ],
    ],
)
def test_fold_keeps_what_would_change_bits_or_layout(lines: list[str]) -> None:
    body = "\n".join(f"  {line}" for line in lines)
    last = lines[-1].split(":")[0]
    head = 'graph k(%0: float32[2,3] "x") {\n  %1: float32[2,3] = exp(%0)'
    text = f"{head}\n{body}\n  return {last}\n}}"
    graph = parse_graph(text)
    assert PASSES["fold"](graph) is graph


def test_a_reshape_pair_is_not_one_reshape_for_a_transposed_array() -> None:
    # why the reshape rule needs a C-ordered x: both results are right, their strides differ
    x = np.ones((4, 3), np.float32).T
    assert x.reshape(-1).reshape(3, 4, 1).strides != x.reshape(3, 4, 1).strides


def test_signed_zeros_survive_folding() -> None:
    text = """
graph z(%0: float32[4] "x") {
  %1: float32[4] = negative(%0)
  %2: float32[4] = add(%1, 0.0)
  %3: float32[4] = add(%1, -0.0)
  %4: float32[4] = subtract(%1, 0.0)
  return %2, %3, %4
}"""
    graph = parse_graph(text)
    out, _ = run_passes(graph, ("fold", "dce"), verify_each=True)
    assert [n.op for n in out.nodes] == ["negative", "add"]  # only x + 0.0 stays
    x = np.zeros(4, np.float32)  # -x is -0.0
    for got, want in zip(interpret(out, [x]).outputs, interpret(graph, [x]).outputs):
        assert np.array_equal(np.signbit(got), np.signbit(want))


def test_fold_composes_transposes_and_reshapes() -> None:
    text = """
graph t(%0: float32[2,3,4] "x", %1: float32[6,6] "w") {
  %2: float32[3,4,2] = transpose(%0) {axes=(1, 2, 0)}  # t.py:1
  %3: float32[4,3,2] = transpose(%2) {axes=(1, 0, 2)}  # t.py:2
  %4: float32[6,6] = matmul(%1, %1)  # t.py:3
  %5: float32[36] = reshape(%4) {shape=(-1,)}  # t.py:4
  %6: float32[4,9] = reshape(%5) {shape=(4, 9)}  # t.py:5
  return %3, %6
}"""
    graph = parse_graph(text)
    out, _ = run_passes(graph, ("fold", "dce"), verify_each=True)
    assert print_graph(out).splitlines()[1:4] == [
        "  %3: float32[4,3,2] = transpose(%0) {axes=(2, 1, 0)}  # t.py:2",
        "  %4: float32[6,6] = matmul(%1, %1)  # t.py:3",
        "  %6: float32[4,9] = reshape(%4) {shape=(4, 9)}  # t.py:5",  # matmul's result is C
    ]
    assert_same_run(graph, out, *random_args(graph))


def test_fold_skips_rules_that_change_types() -> None:
    text = """
graph s(%0: float32[3] "x", %1: int32[3] "i") {
  const %2: float64[3]
  const %3: float32[2,3]
  %4: float32[2,3] = add(%0, %3)
  %5: float64[3] = multiply(%0, %2)
  %6: float32[3] = cast(%1) {dtype='float32'}
  %7: float64[3] = multiply(%1, 1.0)
  return %4, %5, %6, %7
}"""
    ones = {2: np.ones(3), 3: np.zeros((2, 3), "float32")}
    graph = parse_graph(text, ones)
    assert PASSES["fold"](graph) is graph


def test_constant_folding_skips_big_results() -> None:
    text = """
graph c(%0: float32[3] "x") {
  %1: float32[600,600] = full() {dtype='float32', shape=(600, 600), value=1.0}
  %2: float32[3] = full() {dtype='float32', shape=(3,), value=2.0}
  %3: float32[3] = multiply(%2, %2)
  %4: float32[3] = add(%0, %3)
  return %4, %1
}"""
    graph = parse_graph(text)
    out, _ = run_passes(graph, "O2", verify_each=True)
    assert [n.op for n in out.nodes] == ["full", "add"]
    assert [v.id for v in out.consts] == [3]
    assert_same_run(graph, out, *random_args(graph))


SEED = """
graph g(%0: float32[4,3] "x", %1: float32[4,3] "w") {{
  %2: float32[4,3] = multiply(%0, %1)
  %3: float32[] = sum(%2) {{axis=None, keepdims=False}}
  %4: float32[] = full_like(%3) {{dtype=None, value=1}}
  %5: float32[1,1] = reshape(%4) {{shape=(1, 1)}}
  %6: float32[4,3] = broadcast_to(%5) {{shape=(4, 3)}}
  %7: float32[4,3] = {op}
  return %7
}}"""


def test_the_seed_gradient_folds_and_its_broadcast_is_read_unbroadcast() -> None:
    # the backward seed ones_like(loss) reads only the loss's type: a constant, so the loss's
    # sum is dead; the multiply reads the (1, 1) constant with numpy's own broadcasting
    graph = parse_graph(SEED.format(op="multiply(%1, %6)"))
    out, _ = run_passes(graph, ("fold", "dce"), verify_each=True)
    assert [n.op for n in out.nodes] == ["multiply"]
    assert [tuple(v.shape) for v in out.nodes[0].inputs] == [(4, 3), (1, 1)]
    assert_same_run(graph, out, *random_args(graph))


def test_a_broadcast_stays_where_reading_its_source_would_change_the_type() -> None:
    graph = parse_graph(SEED.format(op="tanh(%6)"))  # tanh of the (1, 1) source is (1, 1)
    out, _ = run_passes(graph, ("fold", "dce"), verify_each=True)
    assert [n.op for n in out.nodes] == ["broadcast_to", "tanh"]
    assert_same_run(graph, out, *random_args(graph))


def test_full_like_of_a_transposed_value_is_not_a_constant() -> None:
    # numpy's full_like keeps a transposed operand's strides, a folded constant is C-ordered
    assert not np.full_like(np.ones((4, 3)).T, 1).flags.c_contiguous
    text = """
graph f(%0: float32[4,3] "x") {
  %1: float32[3,4] = transpose(%0) {axes=None}
  %2: float32[3,4] = full_like(%1) {dtype=None, value=2.0}
  return %2
}"""
    graph = parse_graph(text)
    assert PASSES["fold"](graph) is graph


def test_a_fill_numpy_cannot_make_is_left_for_the_runtime() -> None:
    text = """
graph f(%0: int64[3] "i") {
  %1: int64[3] = full_like(%0) {dtype=None, value=nan}
  return %1
}"""
    graph = parse_graph(text)
    assert PASSES["fold"](graph) is graph
