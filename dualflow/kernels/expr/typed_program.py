"""An elementwise expression lowered to a typed straight-line program shared by kernel backends.

Each step is one call with the numpy dtype of its result and the dtype its operands are cast to
(numpy's loop type), found by running numpy itself on one-element samples, so numpy's promotion
rules (weak Python scalars included) decide the types, and identical subtrees are computed once.
The eager CUDA kernels and the fused kernels (numba, blocked numpy, CUDA) share this lowering.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from dualflow.kernels.base.lru_dict import Recent
from dualflow.kernels.expr.expression import Expr, check_expr, compile_numpy
from dualflow.kernels.expr.scalar_table import FUNCTIONS, squares

Ref = tuple  # ("in", k) | ("const", value) | ("step", j)
# A weak Python-scalar input (given as its type) is passed to a kernel as this C-side dtype: wide
# enough to hold the value exactly; each step then casts it to its loop type as numpy does.
WEAK_DTYPES = {bool: np.dtype(bool), int: np.dtype(np.int64), float: np.dtype(np.float64)}


@dataclass(frozen=True)
class Step:
    """One call: ``fn(*operands)`` computed in ``ctype`` giving ``dtype``."""

    fn: str
    operands: tuple[Ref, ...]
    dtype: np.dtype
    ctype: np.dtype


@dataclass(frozen=True)
class Program:
    """The steps in evaluation order; the last one is the result."""

    steps: tuple[Step, ...]
    in_dtypes: tuple[np.dtype, ...]

    @property
    def dtype(self) -> np.dtype:
        """The result dtype."""
        return self.steps[-1].dtype

    @property
    def transcendental(self) -> bool:
        """Whether any step calls a transcendental function that numba would compute with its
        scalar libm (slow, and not numpy's bits): all but the ``vectorized`` ones."""
        return any(
            FUNCTIONS[s.fn].transcendental and not FUNCTIONS[s.fn].in_numba(s.ctype)
            for s in self.steps
        )


def apply_numpy(fn: str, operands: list[Any], out: Any = None) -> Any:
    """Evaluate one call like the op's numpy forward, into ``out`` when given.

    Example:
        >>> apply_numpy("add", [np.float32(1), 0.5]).dtype
        dtype('float32')
    """
    row = FUNCTIONS[fn]
    if row.evaluate is not None:
        return row.evaluate(operands, out)
    if fn == "power":  # x ** 2 in floats is what eager runs: numpy's square (scalar.squares)
        base = np.asarray(operands[0]).dtype
        if squares(Step(fn, (("in", 0), ("const", operands[1])), base, base)):
            return np.square(operands[0]) if out is None else np.square(operands[0], out=out)
    function = getattr(np, row.ufunc)
    return function(*operands) if out is None else function(*operands, out=out)


def sum_dtypes(dtype: Any) -> tuple[np.dtype, np.dtype]:
    """(accumulator, result) dtypes of a fused sum of ``dtype`` elements: the result follows
    numpy's ``sum`` (int32 and bool give int64, float32 stays float32); floats are added in
    float64, integers in the result type (wrapping as numpy's do).

    Example:
        >>> [d.name for d in sum_dtypes("float32") + sum_dtypes("bool")]
        ['float64', 'float32', 'int64', 'int64']
    """
    result = np.add.reduce(np.ones(1, dtype)).dtype
    return (np.dtype(np.float64) if result.kind == "f" else result), result


_LOWERED = Recent(4096)  # every build of a plan lowers the same fused expressions again


def exact_key(value: Any) -> Any:
    """A key equal only for values of the same type and bits: 1, 1.0 and True differ, as do 0.0
    and -0.0 (Python's ``==`` and ``hash`` take each pair as one), NaN payloads too.

    Example:
        >>> exact_key((1, 1.0)) == exact_key((1.0, 1)), exact_key(-0.0) == exact_key(0.0)
        (False, False)
    """
    kind = type(value)
    if kind is tuple or kind is list:
        return (kind.__name__, tuple(exact_key(v) for v in value))
    if kind is float:
        return ("float", struct.pack("<d", value))
    if isinstance(value, np.generic):
        return (kind.__name__, value.tobytes())
    return (kind, value)


def lower_expr(expr: Expr, args: tuple[str, ...], in_dtypes: tuple[Any, ...]) -> Program:
    """Lower ``expr`` over inputs ``args`` of ``in_dtypes`` to a typed Program (memoized: the
    result is a pure function of the three, and immutable).

    An input dtype may be the Python type ``bool``, ``int`` or ``float``: a weak scalar, typed
    the way numpy types a Python scalar operand (``float32_array * 2.0`` stays float32).

    Example:
        >>> e = ("call", "multiply", ("var", "a0"), ("var", "a1"))
        >>> p = lower_expr(e, ("a0", "a1"), ("float32", float))
        >>> p.steps[0].fn, p.dtype, p.in_dtypes[1]
        ('multiply', dtype('float32'), dtype('float64'))
    """
    key = exact_key((expr, tuple(args), tuple(in_dtypes)))
    found = _LOWERED.get(key)
    if found is None:
        found = _lowered(expr, tuple(args), tuple(in_dtypes))
        _LOWERED[key] = found
    return found


def _lowered(expr: Expr, args: tuple[str, ...], in_dtypes: tuple[Any, ...]) -> Program:
    check_expr(expr, tuple(args))  # renderers write it into source: only well-formed ones
    weak = tuple(d if d in WEAK_DTYPES else None for d in in_dtypes)
    dtypes = tuple(WEAK_DTYPES[w] if w else np.dtype(d) for w, d in zip(weak, in_dtypes))
    steps: list[Step] = []
    samples: list[Any] = []
    memo: dict[Any, Ref] = {}

    def sample(ref: Ref) -> Any:
        if ref[0] == "in":
            kind = weak[ref[1]]
            return kind(1) if kind else np.ones(1, dtypes[ref[1]])
        return ref[1] if ref[0] == "const" else samples[ref[1]]

    def visit(node: Expr) -> Ref:
        key = exact_key(node)  # ``==`` would take x + 0.0 and x + -0.0 (or * 1, * 1.0) as one
        if key in memo:
            return memo[key]
        if node[0] == "var":
            ref: Ref = ("in", args.index(node[1]))
        elif node[0] == "const":
            ref = ("const", node[1])
        elif not _has_var(node):  # numpy makes a constant call's result a strong scalar
            ref = ("const", compile_numpy(node, (), ())(np))
        else:
            operands = tuple(visit(e) for e in node[2:])
            with np.errstate(all="ignore"):
                result = np.asarray(apply_numpy(node[1], [sample(r) for r in operands]))
            ctype = _compute_type(node[1], [sample(r) for r in operands], result.dtype)
            steps.append(Step(node[1], operands, result.dtype, ctype))
            samples.append(result)
            ref = ("step", len(steps) - 1)
        memo[key] = ref
        return ref

    visit(expr)
    return Program(tuple(steps), dtypes)


def _has_var(expr: Expr) -> bool:
    return expr[0] == "var" or (expr[0] == "call" and any(_has_var(e) for e in expr[2:]))


def _compute_type(fn: str, operands: list[Any], result: np.dtype) -> np.dtype:
    loop = FUNCTIONS[fn].loop
    if loop == "operands":  # comparisons: computed in the operands' common type
        return np.result_type(*operands)
    if loop == "first":  # astype: the operand's own type
        return np.asarray(operands[0]).dtype
    return result
