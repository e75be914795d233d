"""Size expressions: polynomials with integer coefficients over size symbols (issue 39).

A polynomial is a sorted tuple of (monomial, coefficient); a monomial is a sorted tuple of
atoms: a symbol (``("sym", "s0")``) or a floor division / remainder by an int that did not
simplify. ``(s0*784)//784`` simplifies to ``s0``; ``bounds`` over sizes >= 2 decide comparisons
such as ``s0 == 1`` without a guard. ``symbolic_shapes.SymInt`` computes with these.
"""

from __future__ import annotations

import math
import operator

Poly = tuple  # ((monomial, coefficient), ...) sorted; a monomial is a sorted tuple of atoms


def _poly(terms: dict) -> Poly:
    return tuple(sorted((m, c) for m, c in terms.items() if c != 0))


def const(value: int) -> Poly:
    """The polynomial of an integer constant.

    Example:
        >>> const(3), const(0)
        ((((), 3),), ())
    """
    return _poly({(): value})


def symbol(name: str) -> Poly:
    """The polynomial of one size symbol.

    Example:
        >>> render(symbol("s0"))
        's0'
    """
    return _poly({(("sym", name),): 1})


def add(a: Poly, b: Poly, sign: int = 1) -> Poly:
    terms = dict(a)
    for m, c in b:
        terms[m] = terms.get(m, 0) + sign * c
    return _poly(terms)


def multiply(a: Poly, b: Poly) -> Poly:
    terms: dict = {}
    for ma, ca in a:
        for mb, cb in b:
            m = tuple(sorted(ma + mb))
            terms[m] = terms.get(m, 0) + ca * cb
    return _poly(terms)


def constant_of(p: Poly) -> int | None:
    """The integer a polynomial is, or None when it has symbols.

    Example:
        >>> constant_of(const(4)), constant_of(symbol("s0"))
        (4, None)
    """
    if not p:
        return 0
    return p[0][1] if len(p) == 1 and p[0][0] == () else None


def divide(kind: str, p: Poly, d: int) -> Poly:
    """``p // d`` or ``p % d`` for an int ``d > 0``, simplified when the symbolic part is a
    multiple of ``d`` (``(784*s0 + 3) // 784`` is ``s0``)."""
    k = dict(p).get((), 0)
    rest = [(m, c) for m, c in p if m != ()]
    if all(c % d == 0 for _, c in rest):
        if kind == "mod":
            return const(k % d)
        return add(_poly({m: c // d for m, c in rest}), const(k // d))
    return _poly({((kind, p, d),): 1})


def evaluate(p: Poly, binding: dict[str, int]) -> int:
    """The value of a polynomial for the symbols' sizes in ``binding``.

    Example:
        >>> evaluate(add(multiply(symbol("s0"), const(16)), const(1)), {"s0": 3})
        49
    """
    total = 0
    for monomial, coefficient in p:
        value = coefficient
        for atom in monomial:
            value *= _atom_value(atom, binding)
        total += value
    return total


def _atom_value(atom: tuple, binding: dict[str, int]) -> int:
    if atom[0] == "sym":
        return binding[atom[1]]
    inner = evaluate(atom[1], binding)
    return inner // atom[2] if atom[0] == "floordiv" else inner % atom[2]


def render(p: Poly) -> str:
    """Readable text of a polynomial (``s0*16 + 1``), for the IR printer and explain.

    Example:
        >>> render(divide("floordiv", add(symbol("s1"), const(-3)), 2))
        '(s1 - 3)//2'
    """
    if not p:
        return "0"
    parts = []
    for monomial, c in sorted(p, key=lambda t: t[0] == ()):
        atoms = [_atom_text(a) for a in monomial]
        text = "*".join(atoms + ([str(abs(c))] if abs(c) != 1 or not atoms else []))
        parts.append(("- " if c < 0 else "+ ") + text)
    first = parts[0]
    return (first[2:] if first.startswith("+") else "-" + first[2:]) + "".join(
        " " + q for q in parts[1:]
    )


def _atom_text(atom: tuple) -> str:
    if atom[0] == "sym":
        return atom[1]
    return f"({render(atom[1])}){'//' if atom[0] == 'floordiv' else '%'}{atom[2]}"


def _bounds(p: Poly, least: int = 2) -> tuple[float, float]:
    """Lower and upper bounds of ``p`` over sizes >= ``least`` (infinite where unknown): what
    decides ``s0 == 1`` or ``-s0 + 1 <= 0`` without a guard."""
    low = high = 0.0
    for monomial, c in p:
        if monomial and any(a[0] != "sym" for a in monomial):
            return -math.inf, math.inf
        at_two = c * least ** len(monomial)
        if not monomial:
            low, high = low + c, high + c
        elif c > 0:
            low, high = low + at_two, math.inf
        else:
            low, high = -math.inf, high + at_two
    return low, high


def decided(p: Poly, relation: str, least: int = 2) -> bool | None:
    """Whether ``p <relation> 0`` holds for every size >= ``least`` (True), for none (False),
    or depends on the sizes (None).

    Example:
        >>> one_less = add(symbol("s0"), const(-1))
        >>> decided(one_less, "=="), decided(one_less, "==", least=1)
        (False, None)
    """
    low, high = _bounds(p, least)
    always = {"==": False, "!=": False, "<": high < 0, "<=": high <= 0, ">": low > 0}
    always[">="] = low >= 0
    always["!="] = low > 0 or high < 0
    never = {"==": low > 0 or high < 0, "!=": False, "<": low >= 0, "<=": low > 0}
    never.update({">": high <= 0, ">=": high < 0})
    return True if always[relation] else False if never[relation] else None


def symbols_of(p: Poly) -> set[str]:
    """The names of the symbols ``p`` depends on (inside divisions too).

    Example:
        >>> sorted(symbols_of(divide("floordiv", add(symbol("s1"), symbol("s0")), 2)))
        ['s0', 's1']
    """
    names: set[str] = set()
    for monomial, _ in p:
        for atom in monomial:
            names |= {atom[1]} if atom[0] == "sym" else symbols_of(atom[1])
    return names


def quotient(p: Poly, q: Poly) -> Poly | None:
    """``p / q`` when ``q`` is one term that divides every term of ``p`` exactly (``s0*s1*6``
    by ``s0*2`` is ``s1*3``), else None.

    Example:
        >>> render(quotient(multiply(symbol("s0"), symbol("s1")), symbol("s0")))
        's1'
    """
    if len(q) != 1 or not q[0][0]:
        return None
    (divisor, c), terms = q[0], {}
    for monomial, coefficient in p:
        rest = list(monomial)
        for atom in divisor:
            if atom not in rest:
                return None
            rest.remove(atom)
        if coefficient % c:
            return None
        terms[tuple(rest)] = coefficient // c
    return _poly(terms)


def ratio(p: Poly, q: Poly) -> int | None:
    """``k`` when ``p`` is exactly ``k * q`` for an integer ``k`` >= 0, else None."""
    if not q or len(p) != len(q) or [m for m, _ in p] != [m for m, _ in q]:
        return None
    k, rest = divmod(p[0][1], q[0][1])
    if rest or k < 0 or any(c != k * d for (_, c), (_, d) in zip(p, q)):
        return None
    return k


COMPARE = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le}
COMPARE.update({">": operator.gt, ">=": operator.ge})


def render_guard(guard: tuple[Poly, str, bool]) -> str:
    """A recorded guard as text (``s0 - 8 > 0``).

    Example:
        >>> render_guard((symbol("s0"), ">", False))
        's0 <= 0'
    """
    p, relation, holds = guard
    return f"{render(p)} {relation if holds else NEGATE[relation]} 0"


NEGATE = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
