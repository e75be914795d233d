"""Size expressions and graphs with symbolic sizes in the text format (issue 39, ``symir``):
print -> parse gives the same polynomials, guards, shapes, literals and attributes; malformed
text is a ``GraphParseError``; ``verify_symbolic`` catches a corrupted symbolic shape."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualflow.graph_ir import GraphParseError, GraphVerifyError
from dualflow.graph_ir.size_text import SizeTextError, parse_guard, parse_size
from dualflow.graph_ir.symbolic_text import parse_symbolic, print_symbolic
from dualflow.graph_ir.verify_symbolic import verify_symbolic
from dualflow.size_expressions import evaluate, render, render_guard
from dualflow.symbolic_shapes import ShapeEnv, SymInt


def _expressions() -> st.SearchStrategy:
    """SymInt expressions built the way traces build them (+, -, *, //, % by ints, negation)."""
    env = ShapeEnv()
    symbols = [env.new_symbol(n) for n in (5, 7, 12)]
    leaves = st.sampled_from(symbols) | st.integers(-20, 20)

    def extend(children: st.SearchStrategy) -> st.SearchStrategy:
        pairs = st.tuples(children, children)
        divided = st.tuples(children, st.integers(1, 9))
        return (
            pairs.map(lambda p: p[0] + p[1])
            | pairs.map(lambda p: p[0] - p[1])
            | pairs.map(lambda p: p[0] * p[1])
            | children.map(lambda a: -a)
            | divided.map(lambda p: p[0] // p[1])
            | divided.map(lambda p: p[0] % p[1])
        )

    return st.recursive(leaves, extend, max_leaves=12).filter(lambda e: isinstance(e, SymInt))


@settings(max_examples=300, deadline=None)
@given(_expressions(), st.sampled_from(["==", "!=", "<", "<=", ">", ">="]))
def test_expressions_round_trip_as_the_same_polynomial(expr: SymInt, relation: str) -> None:
    text = render(expr.poly)
    assert parse_size(text) == expr.poly
    assert render(parse_size(text)) == text
    binding = {"s0": 3, "s1": 11, "s2": 4}
    assert evaluate(parse_size(text), binding) == evaluate(expr.poly, binding)
    guard = (expr.poly, relation, True)
    assert parse_guard(render_guard(guard)) == guard


@pytest.mark.parametrize(
    "text",
    ["s0 +", "(s0", "s0)", "x0", "__import__('os')", "s0 ** 2", "(s0)//0", "(s0)//-2", "s0//2",
     "1e5", "(" * 100 + "s0" + ")" * 100, "9" * 50],
)  # fmt: skip
def test_malformed_expressions_are_refused(text: str) -> None:
    with pytest.raises(SizeTextError):
        parse_size(text)


GRAPH = """graph f(%0: float32[s0,s1] "x") {
  symbols s0 = arg0[0] at 4, s1 = arg0[1] at 6
  fixed arg1[0] = 1
  guards (s0*s1)%12 == 0; s0*3 - 12 == 0; (s0*s1)//12*s0*3 - s0*s1 == 0; (s0*s1)//12 >= 0; \
(s0*s1)//12 - 1 != 0; -(s0*s1)//12*s0*3 + s0*s1 == 0
  %1: float32[s0*3,(s0*s1)//12] = reshape(%0) {shape=(s0*3, -1)}  # f.py:2
  %2: float32[] = sum(%1) {axis=None, keepdims=False}  # f.py:3
  %3: float32[] = multiply(%2, (1.0/(s0*s1)))  # f.py:3
  %4: float32[] = divide(%3, s0)  # f.py:4
  return %4
}"""


def test_a_symbolic_graph_round_trips_with_its_facts() -> None:
    parsed = verify_symbolic(parse_symbolic(GRAPH))
    assert print_symbolic(parsed) == GRAPH
    graph = parsed.graph
    assert graph.inputs[0].shape == (4, 6) and graph.nodes[0].outputs[0].shape == (12, 2)
    assert graph.nodes[0].attrs == {"shape": (12, -1)}
    assert graph.nodes[2].inputs[1] == 1.0 / 24 and graph.nodes[3].inputs[1] == 4
    assert parsed.symbols == [(0, 0, "s0"), (0, 1, "s1")] and parsed.constants == [(1, 0, 1)]
    guards = [render_guard(g) for g in parsed.env.guards]
    assert guards[:2] == ["(s0*s1)%12 == 0", "s0*3 - 12 == 0"] and len(guards) == 6
    (attrs, literals) = parsed.nodes[graph.nodes[2]]
    assert attrs is None and literals[1].value_for({"s0": 5, "s1": 10}) == 1.0 / 50


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("at 4, s1", "at 1, s1", "below 2"),
        ("divide(%3, s0)", "divide(%3, s7)", "undeclared symbols"),
        ("guards (s0*s1)%12 == 0", "guards (s0*s1)%12 = 0", "EXPR RELATION EXPR"),
        ("float32[s0,s1]", "float32[s0,s1+]", "expected '\\('"),
        ("(1.0/(s0*s1))", "(1.0/(3))", "must hold a symbol"),
        ("(1.0/(s0*s1))", "(1.0/(s0*s9))", "undeclared symbols"),
        ("fixed arg1[0] = 1", "fixed arg1 = 1", "not of the form"),
    ],
)
def test_malformed_symbolic_text_is_a_parse_error(old: str, new: str, message: str) -> None:
    with pytest.raises(GraphParseError, match=message):
        parse_symbolic(GRAPH.replace(old, new))


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [  # each corrupted shape agrees with the concrete one at the hints, not as a polynomial
        ("%1: float32[s0*3,", "%1: float32[s1*2,", r"recorded as float32\[s1\*2,"),
        ("(s0*s1)//12] = reshape", "s0 - 2] = reshape", "infer gives float32"),
        ("guards (s0*s1)%12 == 0; ", "guards ", r"depends on \(s0\*s1\)%12 == 0"),
    ],
)  # fmt: skip
def test_verify_symbolic_names_the_node_and_shapes(old: str, new: str, message: str) -> None:
    corrupted = parse_symbolic(GRAPH.replace(old, new))
    with pytest.raises(GraphVerifyError, match=message):
        verify_symbolic(corrupted)


def test_a_remainder_is_not_a_value_reference() -> None:
    text = GRAPH.replace("divide(%3, s0)", "divide(%3, (s0 + 1)%2 + s0)")
    parsed = parse_symbolic(text)
    assert print_symbolic(parsed) == text
    assert render(parsed.nodes[parsed.graph.nodes[3]][1][1].poly) == "(s0 + 1)%2 + s0"


def test_verify_symbolic_wants_every_symbol_bound_to_an_argument() -> None:
    unbound = parse_symbolic(GRAPH)
    unbound.symbols = unbound.symbols[:1]  # s1 still used by shapes and guards
    with pytest.raises(GraphVerifyError, match="do not match"):
        verify_symbolic(unbound)
    del unbound.env.hints["s1"]
    with pytest.raises(GraphVerifyError, match=r"symbols \['s1'\] no argument dimension binds"):
        verify_symbolic(unbound)
