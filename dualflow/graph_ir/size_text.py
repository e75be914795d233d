"""Read size expressions back from text: the inverse of ``size_expressions.render`` (issue 39).

A small recursive-descent parser over the grammar ``render`` writes; nothing is evaluated as
Python (no ``eval``: a symbolic graph's text may come from disk). ``//`` and ``%`` apply to the
parenthesised group right before them and bind tighter than ``*``, as ``render`` means them
(``(s0 - 3)//2*s1`` is ``((s0 - 3)//2)*s1``).

    expr   = term, { ("+" | "-"), term } ;
    term   = [ "-" ], factor, { "*", factor } ;
    factor = int | symbol | "(", expr, ")", [ ("//" | "%"), int ] ;
    symbol = "s", digits ;
    guard  = expr, ("==" | "!=" | "<" | "<=" | ">" | ">="), expr ;
"""

from __future__ import annotations

import re

from dualflow.size_expressions import COMPARE, Poly, add, const, divide, multiply, symbol

_TOKEN = re.compile(r"\s*(?:(\d+)|(s\d+)|(//|%|==|!=|<=|>=|[-+*()<>]))")
MAX_TEXT = 10_000  # an expression longer than this is not one a trace made
MAX_DEPTH = 64  # nested parentheses (Python's recursion limit must not be the guard)
MAX_DIGITS = 40


class SizeTextError(ValueError):
    """The text is not a size expression (the graph parser turns this into its own error)."""


def _tokens(text: str) -> list[str]:
    if len(text) > MAX_TEXT:
        raise SizeTextError(f"size expression of {len(text)} characters")
    found, at = [], 0
    text = text.rstrip()
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            raise SizeTextError(f"unexpected {text[at : at + 10]!r} in size expression {text!r}")
        found.append(match.group(match.lastindex))
        at = match.end()
    return found


class _Reader:
    def __init__(self, text: str) -> None:
        self.text, self.tokens, self.at = text, _tokens(text), 0

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            want = f"{expected!r}" if expected else "more"
            raise SizeTextError(f"expected {want} at token {self.at} of {self.text!r}")
        self.at += 1
        return token

    def integer(self) -> int:
        token = self.take()
        if not token.isdigit() or len(token) > MAX_DIGITS:
            raise SizeTextError(f"expected an integer, got {token!r} in {self.text!r}")
        return int(token)

    def expr(self, depth: int = 0) -> Poly:
        total = self.term(depth)
        while self.peek() in ("+", "-"):
            sign = 1 if self.take() == "+" else -1
            total = add(total, self.term(depth), sign)
        return total

    def term(self, depth: int) -> Poly:
        negative = self.peek() == "-"
        if negative:
            self.take()
        product = self.factor(depth)
        while self.peek() == "*":
            self.take()
            product = multiply(product, self.factor(depth))
        return multiply(product, const(-1)) if negative else product

    def factor(self, depth: int) -> Poly:
        token = self.peek()
        if token is not None and token.isdigit():
            return const(self.integer())
        if token is not None and token[0] == "s":
            return symbol(self.take())
        if depth >= MAX_DEPTH:
            raise SizeTextError(f"size expression nested deeper than {MAX_DEPTH}: {self.text!r}")
        self.take("(")
        inner = self.expr(depth + 1)
        self.take(")")
        if self.peek() in ("//", "%"):
            kind = "floordiv" if self.take() == "//" else "mod"
            divisor = self.integer()
            if divisor <= 0:
                raise SizeTextError(f"divisor {divisor} is not positive in {self.text!r}")
            return divide(kind, inner, divisor)
        return inner

    def done(self) -> None:
        if self.peek() is not None:
            raise SizeTextError(f"unexpected {self.peek()!r} in size expression {self.text!r}")


def parse_size(text: str) -> Poly:
    """The polynomial of a size expression written by ``size_expressions.render``.

    Raises:
        SizeTextError: the text is not a size expression.

    Example:
        >>> from dualflow.size_expressions import render
        >>> render(parse_size("s0*(s1 - 3)//2 + 1"))
        '(s1 - 3)//2*s0 + 1'
    """
    reader = _Reader(text)
    poly = reader.expr()
    reader.done()
    return poly


_RELATION = re.compile(r"\s(==|!=|<=|>=|<|>)\s")


def parse_guard(text: str) -> tuple[Poly, str, bool]:
    """A guard written by ``size_expressions.render_guard`` (``s0 - 8 > 0``) as the recorded
    form ``(lhs - rhs, relation, True)``.

    Raises:
        SizeTextError: the text is not a comparison of two size expressions.

    Example:
        >>> from dualflow.size_expressions import render_guard
        >>> render_guard(parse_guard("s0*2 == s1"))
        's0*2 - s1 == 0'
    """
    parts = _RELATION.split(text.strip())
    if len(parts) != 3 or parts[1] not in COMPARE:
        raise SizeTextError(f"a guard is 'EXPR RELATION EXPR', got {text!r}")
    return add(parse_size(parts[0]), parse_size(parts[2]), -1), parts[1], True
