"""explain's memory prediction as a formula over a template's size symbols (issue 39)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import dualflow as df
from dualflow import nn
from dualflow.tracer.memory_formula import fit, memory_lines, monomials


@settings(max_examples=60, deadline=None)
@given(
    coefficients=st.lists(st.integers(-50, 500), min_size=6, max_size=6),
    sizes=st.lists(st.tuples(st.integers(2, 60), st.integers(2, 60)), min_size=9, max_size=12),
)
def test_fit_recovers_a_polynomial_of_degree_two_in_two_symbols(coefficients, sizes) -> None:
    terms = monomials(["s0", "s1"], 2)
    truth = dict(zip(terms, coefficients))

    def value(b):
        return sum(c * np.prod([b[n] for n in m], dtype=np.int64) for m, c in truth.items())

    bindings = [dict(zip(["s0", "s1"], s)) for s in dict.fromkeys(sizes)]
    points = [(b, int(value(b))) for b in bindings]
    found = fit(points, ["s0", "s1"])
    if found is None:  # the points cannot fix and check the terms
        return
    assert not set(found) - set(terms)
    # exact at every point it was fitted to
    assert all(
        sum(c * np.prod([b[n] for n in m]) for m, c in found.items()) == y for b, y in points
    )
    # the lowest degree wins: points on a curve (s0 * s1 constant over them) fit a constant;
    # where the degree-two terms are fixed by the points (full rank), it is the truth
    rows = np.array([[np.prod([b[n] for n in m]) for m in terms] for b, _ in points], float)
    if any(len(m) == 2 for m in found) and np.linalg.matrix_rank(rows) == len(terms):
        assert all(found.get(m, 0) == Fraction(c) for m, c in truth.items())


def _at(poly: dict, binding: dict) -> Fraction:
    return sum(
        (c * int(np.prod([binding[n] for n in m], dtype=np.int64)) for m, c in poly.items()),
        Fraction(0),
    )


def test_fit_takes_the_lowest_degree_through_points_on_a_curve() -> None:
    # every point has s0 * s1 = 12: the constant 12 passes through all of them, and is found
    points = [({"s0": a, "s1": 12 // a}, a * (12 // a)) for a in (2, 3, 4, 6)]
    assert fit(points, ["s0", "s1"]) == {(): Fraction(12)}


def test_fit_refuses_points_no_single_polynomial_passes_through() -> None:
    # a planner that switched strategy at 10: piecewise, so no formula is printed
    points = [({"s0": s}, 100 * s if s < 10 else 100 * s + 5000) for s in (2, 4, 6, 12, 14, 16)]
    assert fit(points, ["s0"]) is None
    assert fit(points[:2], ["s0"]) is None  # too few to fix and check a line


def test_explain_formula_predicts_the_plan_at_a_size_not_yet_seen() -> None:
    df.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 32), nn.Tanh(), nn.Linear(32, 5))

    def step(x):
        model.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        return loss

    g = df.compile(step)
    for n in [8, 12, 16, 5, 20]:
        g(df.ones(n, 20))
    templates = [t for fam in g.dynamic.families.values() for t in fam.templates]
    template = next(t for t in templates if t.witnessed)
    (line,) = [x for x in memory_lines(template) if "of the plan:" in x]
    assert "fitted to" in line and "s0" in line, line
    assert "predicted peak of the plan" in str(df.explain(g))
    built = dict(
        (tuple(sorted(b.items())), t.plan.predicted_peak)
        for b, t in [(template.hints, template.trace)]
        + [(dict(k), t) for k, t in template.instances.items()]
    )
    formula = fit([(dict(k), v) for k, v in built.items()], ["s0"])
    g(df.ones(37, 20))  # a size no plan was built for
    assert template.instance({"s0": 37}).plan.predicted_peak == sum(
        c * 37 ** len(m) for m, c in formula.items()
    )
