"""Symbolic sizes: ``SymInt``, an integer known by an expression over size symbols (issue 39).

While a compiled function is traced with dynamic dimensions, ``x.shape[0]`` is a ``SymInt``:
its arithmetic builds expressions (``s0*16``, ``(s1-3)//2+1``); every way of turning it into
a plain Python value — a comparison, ``bool``, ``int``/``__index__`` (numpy, ``range``),
``hash``, ``str``, ``float`` — answers with the traced call's value (the *hint*) and records a
guard in the active ``ShapeEnv``: the relation the trace depended on (``s0 > 8``), or, where a
concrete value escaped, the value itself (``s0 == 32``). So whatever code reads a size, the
trace is never reused for sizes where that code would have decided otherwise: unknown is safe.

Expressions are polynomials with integer coefficients over atoms (symbols, and floor divisions
or remainders that do not simplify), so ``(s0*784)//784`` is ``s0`` and equal sizes compare
equal without a guard. Symbols stand for sizes >= 2 (0 and 1 are traced as constants, as in
PyTorch: broadcasting and emptiness change meaning there), which decides ``s0 == 1``,
``s0 != -1`` or ``s0 >= 0`` without a guard.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dualflow.size_expressions import (
    COMPARE,
    NEGATE,
    Poly,
    add,
    const,
    constant_of,
    decided,
    divide,
    evaluate,
    multiply,
    quotient,
    ratio,
    render,
    render_guard,
    symbol,
)
from dualflow.symbolic_escapes import Escapes

ACTIVE = [0]  # how many symbolic traces run in this process: Tensor.shape asks only then


@dataclass
class ShapeEnv:
    """The guards one symbolic trace recorded, and the hint binding it ran with."""

    hints: dict[str, int] = field(default_factory=dict)
    guards: list[tuple[Poly, str, bool]] = field(default_factory=list)  # (p, "==0"/">0", holds)
    escaped: list[str] = field(default_factory=list)  # where a concrete value was taken
    # the trace ended: a SymInt that escaped into Python objects is its traced value from now on
    closed: bool = False
    # where code told a size from an int (``type(n)``): the run may not be eager's (size_identity)
    untrusted: str | None = None

    def new_symbol(self, size: int) -> SymInt:
        """A fresh symbol whose traced size is ``size`` (>= 2)."""
        name = f"s{len(self.hints)}"
        self.hints[name] = size
        return SymInt(symbol(name), size, self)

    def decide(self, p: Poly, relation: str) -> bool:
        """Whether ``p <relation> 0`` holds at the hints; recorded as a guard unless it holds
        for every size >= 1 (or its constant decides it). Symbols are traced at sizes >= 2, so
        ``s0 == 1`` is False here, and its guard ``s0 - 1 != 0`` keeps the template from size 1,
        where it would have gone the other way; ``s0 != -1`` needs none."""
        holds = COMPARE[relation](evaluate(p, self.hints), 0)
        if self.closed:
            return holds
        if constant_of(p) is not None or decided(p, relation, least=1) is not None:
            return holds  # the same for every size: nothing to guard
        guard = (p, relation if holds else NEGATE[relation], True)  # one form per relation
        if guard not in self.guards:
            self.guards.append(guard)
        return holds

    def failing(self, binding: dict[str, int]) -> str | None:
        """The first guard that does not hold for ``binding`` (as text), or None."""
        for p, relation, holds in self.guards:
            if COMPARE[relation](evaluate(p, binding), 0) != holds:
                return render_guard((p, relation, holds))
        return None


def _operand(other: Any) -> Poly | None:
    if isinstance(other, SymInt):
        return other.poly
    if type(other) is int or type(other) is bool:
        return const(int(other))
    return None


class SymInt(Escapes):
    """A size known by its expression over symbols, and its value in the traced call (``hint``).

    Example:
        >>> env = ShapeEnv(); n = env.new_symbol(32)
        >>> m = n * 16 + 1
        >>> m.expr, m.hint, (m * 2) // 2 == m, env.guards
        ('s0*16 + 1', 513, True, [])
        >>> bool(n > 8), len(env.guards)
        (True, 1)
    """

    __slots__ = ("env", "hint", "poly")
    PLAIN = int

    def __init__(self, poly: Poly, hint: int, env: ShapeEnv) -> None:
        self.poly, self.hint, self.env = poly, hint, env

    def _make(self, poly: Poly) -> Any:
        value = constant_of(poly)
        if value is not None:
            return value
        return SymInt(poly, evaluate(poly, self.env.hints), self.env)

    def _arith(self, other: Any, how: Any, name: str = "", reflected: bool = False) -> Any:
        q = _operand(other)
        if q is None:  # a float: a SymFloat; another type: the concrete value takes part
            pair = (other, self) if reflected else (self, other)
            made = arithmetic(name, *pair) if name else NotImplemented
            if made is not NotImplemented:
                return made
            return how(self.concrete("arithmetic with a non-int"), other)
        return self._make(how(self.poly, q))

    def __add__(self, other: Any) -> Any:
        return self._arith(other, lambda a, b: add(a, b) if isinstance(a, tuple) else a + b, "add")

    def __radd__(self, other: Any) -> Any:
        return self._arith(
            other, lambda a, b: add(a, b) if isinstance(a, tuple) else b + a, "add", True
        )

    def __sub__(self, other: Any) -> Any:
        return self._arith(
            other, lambda a, b: add(a, b, -1) if isinstance(a, tuple) else a - b, "sub"
        )

    def __rsub__(self, other: Any) -> Any:
        return self._arith(
            other, lambda a, b: add(b, a, -1) if isinstance(a, tuple) else b - a, "sub", True
        )

    def __mul__(self, other: Any) -> Any:
        return self._arith(
            other, lambda a, b: multiply(a, b) if isinstance(a, tuple) else a * b, "mul"
        )

    def __rmul__(self, other: Any) -> Any:
        return self._arith(
            other, lambda a, b: multiply(a, b) if isinstance(a, tuple) else b * a, "mul", True
        )

    def __neg__(self) -> Any:
        return self._make(multiply(self.poly, const(-1)))

    def __pos__(self) -> SymInt:
        return self

    def _divided(self, kind: str, other: Any) -> Any:
        if isinstance(other, SymInt):
            k = ratio(self.poly, other.poly)  # (s0*6) // (s0*2): 3, no guard
            if k is not None:
                return k if kind == "floordiv" else 0
            q = quotient(self.poly, other.poly)  # (s0*s1) // s0: s1, no guard
            if q is not None:
                return self._make(q) if kind == "floordiv" else 0
        d = other.concrete("a divisor") if isinstance(other, SymInt) else other
        if type(d) is not int or d <= 0:  # floats, negative divisors: the concrete value
            concrete = self.concrete("a division")
            return concrete // d if kind == "floordiv" else concrete % d
        return self._make(divide(kind, self.poly, d))

    def __floordiv__(self, other: Any) -> Any:
        return self._divided("floordiv", other)

    def __mod__(self, other: Any) -> Any:
        return self._divided("mod", other)

    def __rfloordiv__(self, other: Any) -> Any:
        return other // self.concrete("a divisor")

    def __rmod__(self, other: Any) -> Any:
        return other % self.concrete("a divisor")

    def __truediv__(self, other: Any) -> Any:  # ``n / (n - 1)``: a float kept as an expression
        made = arithmetic("truediv", self, other)
        return self.concrete("true division") / other if made is NotImplemented else made

    def __rtruediv__(self, other: Any) -> Any:  # ``1.0 / n``: a mean's factor
        made = arithmetic("truediv", other, self)
        return other / self.concrete("true division") if made is NotImplemented else made

    def _compare(self, other: Any, relation: str) -> Any:
        q = _operand(other)
        if q is None:
            return COMPARE[relation](self.concrete("a comparison with a non-int"), other)
        return self.env.decide(add(self.poly, q, -1), relation)

    __hash__ = Escapes.__hash__  # defining __eq__ below would otherwise drop the inherited one

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return self._compare(other, "==")

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return self._compare(other, "!=")

    def __lt__(self, other: Any) -> Any:
        return self._compare(other, "<")

    def __le__(self, other: Any) -> Any:
        return self._compare(other, "<=")

    def __gt__(self, other: Any) -> Any:
        return self._compare(other, ">")

    def __ge__(self, other: Any) -> Any:
        return self._compare(other, ">=")

    def __bool__(self) -> bool:
        return self._compare(0, "!=")

    def concrete(self, why: str = "a concrete value") -> int:
        """The traced call's value, guarded: the trace serves only calls where it is the same."""
        if not self.env.closed:
            self.env.decide(add(self.poly, const(self.hint), -1), "==")
            self.env.escaped.append(why)
        return self.hint

    def __index__(self) -> int:
        return self.concrete("__index__")

    def __int__(self) -> int:
        return self.concrete("int()")

    @property
    def expr(self) -> str:
        """The expression as text (``s0*16 + 1``), for explain and messages; no guard."""
        return render(self.poly)

    def value_for(self, binding: dict[str, int]) -> int:
        """Its value for the symbols' sizes in ``binding``."""
        return evaluate(self.poly, binding)


class SymFloat(Escapes):
    """A float computed from sizes (``1.0 / n``, ``momentum * n / (n - 1)``): the Python
    arithmetic that made it, replayed per call exactly as Python computes it, so an op that takes
    it as a literal (a mean's factor, batch norm's unbiasing) stays bit-identical to eager. A
    comparison or any other use takes the traced call's value, guarded (each size's value).

    Example:
        >>> env = ShapeEnv(); n = env.new_symbol(4)
        >>> f = 1.0 / n
        >>> f.hint, f.value_for({"s0": 8}), env.guards
        (0.25, 0.125, [])
        >>> g = 0.1 * n / (n - 1)
        >>> g.hint == 0.1 * 4 / 3, g.value_for({"s0": 8}) == 0.1 * 8 / 7, g.expr
        (True, True, '((0.1*s0)/(s0 - 1))')
    """

    __slots__ = ("hint", "how", "left", "right")
    PLAIN = float

    def __init__(self, how: str, left: Any, right: Any) -> None:
        self.how, self.left, self.right = how, left, right
        self.hint = _ARITHMETIC[how](_at(left, None), _at(right, None))

    @property
    def expr(self) -> str:
        """The expression as text (``(1.0/(s0*3))``), for explain; no guard."""
        return f"({_text(self.left)}{_SIGNS[self.how]}{_text(self.right)})"

    def value_for(self, binding: dict[str, int]) -> float:
        """Its value for ``binding``, computed as Python computed it."""
        return _ARITHMETIC[self.how](_at(self.left, binding), _at(self.right, binding))

    def leaves(self) -> list[SymInt]:
        """The sizes it was computed from."""
        parts = (self.left, self.right)
        return [
            x
            for p in parts
            for x in (p.leaves() if type(p) is SymFloat else [p])
            if type(x) is SymInt
        ]

    def rebuilt(self, how: Callable[[SymInt], Any]) -> SymFloat:
        """The same arithmetic over ``how(size)`` for each size (sizes of another env)."""

        def part(p: Any) -> Any:
            return p.rebuilt(how) if type(p) is SymFloat else how(p) if type(p) is SymInt else p

        return SymFloat(self.how, part(self.left), part(self.right))

    def concrete(self, why: str = "a concrete value") -> float:
        """The traced call's value, guarded on every size it was computed from."""
        for part in (self.left, self.right):
            if isinstance(part, SYMBOLIC):
                part.concrete(why)
        return self.hint

    def _compare(self, other: Any, how: Any) -> Any:
        if isinstance(other, SYMBOLIC):
            other = other.concrete("a comparison")
        return how(self.concrete("a comparison"), other)

    def __neg__(self) -> Any:
        return SymFloat("mul", self, -1.0)

    def __bool__(self) -> bool:
        return bool(self.concrete("bool()"))


def arithmetic(how: str, left: Any, right: Any) -> Any:
    """``left <how> right`` where one side is a size expression and the result a float (or
    either side is a ``SymFloat``): a ``SymFloat``; other operands (a numpy scalar, a tensor)
    get the traced call's value, guarded.

    Example:
        >>> n = ShapeEnv().new_symbol(4)
        >>> arithmetic("truediv", n, 2).expr, arithmetic("mul", n, 2)
        ('(s0/2)', NotImplemented)
    """
    kinds = (type(left), type(right))
    floating = any(k is SymFloat or k is float for k in kinds) or how == "truediv"
    if floating and all(k in (int, float, SymInt, SymFloat) for k in kinds):
        return SymFloat(how, left, right)
    return NotImplemented


_ARITHMETIC = {"add": operator.add, "sub": operator.sub, "mul": operator.mul}
_ARITHMETIC["truediv"] = operator.truediv
_SIGNS = {"add": " + ", "sub": " - ", "mul": "*", "truediv": "/"}


def _at(value: Any, binding: dict[str, int] | None) -> Any:
    if isinstance(value, SYMBOLIC):
        return value.hint if binding is None else value.value_for(binding)
    return value


def _text(value: Any) -> str:
    if type(value) is SymInt and not value.expr.isidentifier():  # a group: parenthesized
        return f"({value.expr})"
    return value.expr if isinstance(value, SYMBOLIC) else repr(value)


def _float_operator(how: str, reflected: bool) -> Any:
    def method(self: Any, other: Any) -> Any:
        pair = (other, self) if reflected else (self, other)
        return arithmetic(how, *pair)

    return method


for _name in _ARITHMETIC:  # a SymFloat in arithmetic: a SymFloat again
    setattr(SymFloat, f"__{_name}__", _float_operator(_name, False))
    setattr(SymFloat, f"__r{_name}__", _float_operator(_name, True))
for _name in ("eq", "ne", "lt", "gt", "le", "ge"):
    _how = getattr(operator, _name)
    setattr(SymFloat, f"__{_name}__", lambda self, other, how=_how: self._compare(other, how))

SYMBOLIC = (SymInt, SymFloat)  # what a traced op's literal inputs and attributes may hold


def _concretely(name: str) -> Any:
    def method(self: Any, *args: Any) -> Any:
        plain = [a.concrete(name) if isinstance(a, SYMBOLIC) else a for a in args]
        return getattr(self.concrete(name), name)(*plain)

    return method


# Whatever else an int or a float can do, a size does with its traced value, guarded (``n ** 2``,
# ``round(n / 2)``, ``n.bit_length()``): Python finds operators on the type, so each is defined.
_PLAIN_OPERATORS = "pow rpow abs invert lshift rlshift rshift rrshift and rand or ror xor rxor"
_PLAIN_OPERATORS += " divmod rdivmod round trunc floor ceil int pos mod rmod floordiv rfloordiv"
for _kind in SYMBOLIC:
    for _name in _PLAIN_OPERATORS.split():
        if f"__{_name}__" not in _kind.__dict__ and hasattr(_kind.PLAIN, f"__{_name}__"):
            setattr(_kind, f"__{_name}__", _concretely(f"__{_name}__"))
