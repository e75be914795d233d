"""``explain``'s memory prediction of a template as a formula over its size symbols.

Each plan built from a template predicts its own peak (``runtime/memory.py``) at its sizes. Every
byte count in it is a product of sizes, so across sizes where the memory planner makes the same
choices the peak is a polynomial in the symbols. ``fit`` finds that polynomial from the plans'
own predictions: exactly (rational arithmetic, no least squares) over the monomials of degree
<= 2, from as many plans as there are monomials, and only reports it when every further plan
agrees with it. It is a fitted formula, checked, not a proof: where the planner chose otherwise
at some size the check fails and only the numbers are printed.
"""

from __future__ import annotations

import itertools
import random
from fractions import Fraction
from typing import Any

MAX_POINTS = 12  # plans a formula may need (monomials + 1 to check): 3 symbols at degree 2
Monomial = tuple[str, ...]


def monomials(names: list[str], degree: int) -> list[Monomial]:
    """Every monomial of total degree <= ``degree`` in ``names`` (as sorted name tuples).

    Example:
        >>> monomials(["s0", "s1"], 2)
        [(), ('s0',), ('s1',), ('s0', 's0'), ('s0', 's1'), ('s1', 's1')]
    """
    found: list[Monomial] = []
    for d in range(degree + 1):
        found += list(itertools.combinations_with_replacement(sorted(names), d))
    return found


def _value(monomial: Monomial, binding: dict[str, int]) -> int:
    result = 1
    for name in monomial:
        result *= binding[name]
    return result


def _solve(rows: list[list[Fraction]], rhs: list[Fraction]) -> list[Fraction] | None:
    """Gaussian elimination over the rationals; None when the system is singular."""
    n = len(rows)
    a = [row[:] + [b] for row, b in zip(rows, rhs)]
    for col in range(n):
        pivot = next((r for r in range(col, n) if a[r][col] != 0), None)
        if pivot is None:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(n):
            if r != col and a[r][col] != 0:
                factor = a[r][col] / a[col][col]
                a[r] = [x - factor * y for x, y in zip(a[r], a[col])]
    return [a[i][n] / a[i][i] for i in range(n)]


def fit(points: list[tuple[dict[str, int], int]], names: list[str]) -> dict | None:
    """The lowest-degree polynomial (degree <= 2) through every point, as {monomial: coefficient},
    or None when the points are too few to fix and check one, or no such polynomial fits.

    Example:
        >>> pts = [({"s0": s}, 4 * s * s + 64 * s + 100) for s in (2, 3, 5, 8, 9)]
        >>> render(fit(pts, ["s0"]))
        '4*s0^2 + 64*s0 + 100'
    """
    for degree in (0, 1, 2):
        terms = monomials(names, degree)
        if len(points) < len(terms) + 1:
            return None
        coefficients = _fit_terms(points, terms)
        if coefficients is not None:
            return {m: c for m, c in zip(terms, coefficients) if c != 0}
    return None


def _fit_terms(points: list[tuple[dict[str, int], int]], terms: list[Monomial]) -> list | None:
    """Coefficients solved from the first independent points, then checked on all of them."""
    rows = [[Fraction(_value(m, b)) for m in terms] for b, _ in points]
    for chosen in itertools.islice(itertools.combinations(range(len(points)), len(terms)), 64):
        solved = _solve([rows[i] for i in chosen], [Fraction(points[i][1]) for i in chosen])
        if solved is not None:
            agree = all(
                sum(c * x for c, x in zip(solved, row)) == y for row, (_, y) in zip(rows, points)
            )
            return solved if agree else None
    return None


def render(poly: dict[Monomial, Fraction] | None) -> str:
    """A fitted polynomial as text, highest degree first (``4*s0^2 + 64*s0 + 100``)."""
    if not poly:
        return "0"
    parts = []
    for monomial, c in sorted(poly.items(), key=lambda t: (-len(t[0]), t[0])):
        names = [
            f"{n}^{monomial.count(n)}" if monomial.count(n) > 1 else n
            for n in sorted(set(monomial))
        ]
        number = str(abs(c)) if abs(c) != 1 or not names else ""
        text = "*".join(([number] if number else []) + names)
        parts.append(("- " if c < 0 else "+ ") + text)
    first = parts[0]
    return (first[2:] if first.startswith("+") else "-" + first[2:]) + "".join(
        " " + p for p in parts[1:]
    )


def extra_bindings(hints: dict[str, int], admits: Any, count: int, known: list[dict]) -> list:
    """``count`` bindings near ``hints``, not in ``known``, that ``admits`` (the template's
    guards) accepts. Symbols traced at one size move together (they are usually guarded equal,
    a batch dimension of two arguments); drawn by a seeded generator, so that explain prints
    the same every time.

    Example:
        >>> extra_bindings({"s0": 8, "s1": 8}, lambda b: True, 2, [{"s0": 8, "s1": 8}])
        [{'s0': 10, 's1': 10}, {'s0': 16, 's1': 16}]
    """
    generator = random.Random(0)
    found: list[dict] = []
    for _ in range(50 * count):
        if len(found) == count:
            break
        moved = {v: max(2, v + generator.randint(-v // 2, v)) for v in set(hints.values())}
        binding = {k: moved[v] for k, v in hints.items()}
        if binding not in known and binding not in found and admits(binding):
            found.append(binding)
    return found


def free_symbols(bindings: list[dict[str, int]]) -> dict[str, str]:
    """Each symbol -> the first symbol equal to it in every binding (such symbols are one
    variable of the formula).

    Example:
        >>> free_symbols([{"s0": 3, "s1": 3, "s2": 4}, {"s0": 5, "s1": 5, "s2": 5}])
        {'s0': 's0', 's1': 's0', 's2': 's2'}
    """
    names = sorted(bindings[0]) if bindings else []
    same: dict[str, str] = {}
    for i, name in enumerate(names):
        equal = (k for k in names[:i] if all(b[k] == b[name] for b in bindings))
        same[name] = next(equal, name)
    return same


def _peaks(trace: Any) -> dict[str, int | None]:
    backward = trace.backward
    return {
        "plan": trace.plan.predicted_peak,
        "backward plan": None if backward is None else backward.plan.predicted_peak,
    }


def _built(template: Any) -> list[tuple[dict[str, int], Any]]:
    """The template's plans (its own and those built for calls), and more built for explain
    when too few exist to fix and check a formula (explain's cost, never a call's; not kept)."""
    built = [(template.hints, template.trace)]
    built += [(dict(key), trace) for key, trace in template.instances.items()]
    groups = len(set(template.hints.values()))
    needed = len(monomials([f"g{i}" for i in range(groups)], 2)) + 1
    if len(built) < needed <= MAX_POINTS:
        admits = lambda b: template.failing_guard(b) is None  # noqa: E731
        known = [b for b, _ in built]
        for binding in extra_bindings(template.hints, admits, needed - len(built), known):
            try:
                built.append((binding, template.build(binding)))
            except Exception:  # an op refusing these sizes: fewer points, maybe no formula
                continue
    return built


def memory_lines(template: Any) -> list[str]:
    """``explain``'s lines on a template's memory: each plan's predicted peak at the sizes
    built, and the peak as a formula over the symbols where one fits."""
    built = _built(template)
    same = free_symbols([b for b, _ in built])
    names = sorted(set(same.values()))
    tied = ", ".join(f"{k} = {v}" for k, v in same.items() if k != v)
    lines = []
    for kind in ("plan", "backward plan"):
        points = [({n: b[n] for n in names}, _peaks(t)[kind]) for b, t in built]
        points = [(b, p) for b, p in points if p is not None]
        if not points:
            continue
        formula = fit(points, names)
        how = (
            f"{render(formula)} B (fitted to {len(points)} plans' predictions, all agree"
            + (f"; {tied} in each" if tied else "")
            + ")"
            if formula is not None
            else "no formula of degree <= 2 fits (the planner chose differently at some size)"
        )
        numbers = ", ".join(f"{_sizes(b)}: {p} B" for b, p in points[:6])
        lines.append(f"  predicted peak of the {kind}: {how}; {numbers}")
    return lines


def _sizes(binding: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(binding.items()))
