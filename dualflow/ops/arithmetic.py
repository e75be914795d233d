"""Elementwise arithmetic, math functions, comparisons, where and cast: one expression each.

Each op is registered from its scalar expression (which gives its forward and, later, its fused
kernels); the decorated function is its backward, written with dualflow ops so it is itself
differentiable.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.ops.dispatch import apply
from dualflow.ops.registry import elementwise, public_function

_AB = ("a", "b")


@elementwise("add", "a + b", args=_AB, commutative=True)
def ADD(ctx, gy):
    """Sum of two arrays."""
    return gy, gy


@elementwise("subtract", "a - b", args=_AB)
def SUBTRACT(ctx, gy):
    """Difference of two arrays."""
    return gy, (-gy if ctx.needs_input_grad[1] else None)


@elementwise("multiply", "a * b", args=_AB, saves=("x0", "x1"), commutative=True)
def MULTIPLY(ctx, gy):
    """Product of two arrays."""
    need_a, need_b = ctx.needs_input_grad
    return (gy * ctx.x1 if need_a else None), (gy * ctx.x0 if need_b else None)


@elementwise("divide", "a / b", args=_AB, saves=("x1", "y"))
def DIVIDE(ctx, gy):
    """True division."""
    ga = gy / ctx.x1
    return ga, (-ga * ctx.y if ctx.needs_input_grad[1] else None)


@elementwise("negative", "-x")
def NEGATIVE(ctx, gy):
    """Negation."""
    return -gy


@elementwise("power", "a ** b", args=_AB, saves=("x0", "x1", "y"), autocast="float32_cuda")
def POWER(ctx, gy):
    """``a`` raised to ``b``; the gradient for ``b`` needs ``a > 0``."""
    a, b = ctx.x0, ctx.x1
    ga = None
    if ctx.needs_input_grad[0]:  # a ** 1 is a, bit for bit: no pow per element for a square
        ga = gy * b * (a if type(b) in (int, float) and b == 2 else a ** (b - 1))
    gb = gy * ctx.y * log(a) if ctx.needs_input_grad[1] else None
    return ga, gb


# not commutative bit for bit: numpy returns the second operand of equal ones (0.0, -0.0)
@elementwise("maximum", "maximum(a, b)", args=_AB, saves=("x0", "x1"))
def MAXIMUM(ctx, gy):
    """Elementwise maximum; at ties the gradient goes to ``a``."""
    a_wins = greater_equal(ctx.x0, ctx.x1)
    return where(a_wins, gy, 0), where(a_wins, 0, gy)


@elementwise("minimum", "minimum(a, b)", args=_AB, saves=("x0", "x1"))
def MINIMUM(ctx, gy):
    """Elementwise minimum; at ties the gradient goes to ``a``."""
    a_wins = less_equal(ctx.x0, ctx.x1)
    return where(a_wins, gy, 0), where(a_wins, 0, gy)


@elementwise("remainder", "remainder(a, b)", args=_AB, saves=("x0", "x1"))
def REMAINDER(ctx, gy):
    """Python's ``a % b`` (the sign of ``b``); ``d/db`` is ``-floor(a / b)``, as PyTorch's."""
    gb = -gy * floor_divide(ctx.x0, ctx.x1) if ctx.needs_input_grad[1] else None
    return gy, gb


@elementwise("fmod", "fmod(a, b)", args=_AB, saves=("x0", "x1"))
def FMOD(ctx, gy):
    """C's ``fmod`` (the sign of ``a``); ``d/db`` is ``-trunc(a / b)``, as PyTorch's."""
    if not ctx.needs_input_grad[1]:
        return gy, None
    quotient = ctx.x0 / ctx.x1
    return gy, -gy * (quotient - fmod(quotient, 1.0))  # x - fmod(x, 1) is trunc(x), exactly


# Integer-valued: PyTorch has no derivative for floor_divide (its backward raises), so the result
# never requires grad here (the gradient through div(rounding_mode="floor") is 0 in PyTorch too).
FLOOR_DIVIDE = elementwise(
    "floor_divide",
    "floor_divide(a, b)",
    args=_AB,
    doc="Python's ``a // b``: the floor of the quotient (no gradient).",
)(None)


@elementwise("exp", "exp(x)", saves=("y",), autocast="float32_cuda")
def EXP(ctx, gy):
    """Exponential."""
    return gy * ctx.y


@elementwise("log", "log(x)", saves=("x0",), autocast="float32_cuda")
def LOG(ctx, gy):
    """Natural logarithm."""
    return gy / ctx.x0


@elementwise("log1p", "log1p(x)", saves=("x0",), autocast="float32_cuda")
def LOG1P(ctx, gy):
    """``log(1 + x)``, accurate near 0."""
    return gy / (ctx.x0 + 1)


@elementwise("expm1", "expm1(x)", saves=("y",), autocast="float32_cuda")
def EXPM1(ctx, gy):
    """``exp(x) - 1``, accurate near 0."""
    return gy * (ctx.y + 1)


@elementwise("sqrt", "sqrt(x)", saves=("y",))
def SQRT(ctx, gy):
    """Square root."""
    return gy * 0.5 / ctx.y


@elementwise("rsqrt", "1 / sqrt(x)", saves=("y",), autocast="float32_cuda")
def RSQRT(ctx, gy):
    """Reciprocal square root."""
    y = ctx.y
    return gy * -0.5 * y * y * y


@elementwise("square", "x * x", saves=("x0",))
def SQUARE(ctx, gy):
    """Square."""
    return gy * 2 * ctx.x0


@elementwise("abs", "abs(x)", saves=("x0",))
def ABS(ctx, gy):
    """Absolute value (gradient +1 at 0)."""
    return where(greater_equal(ctx.x0, 0), gy, -gy)


@elementwise("sin", "sin(x)", saves=("x0",))
def SIN(ctx, gy):
    """Sine."""
    return gy * cos(ctx.x0)


@elementwise("cos", "cos(x)", saves=("x0",))
def COS(ctx, gy):
    """Cosine."""
    return -gy * sin(ctx.x0)


@elementwise("atan", "atan(x)", saves=("x0",))
def ATAN(ctx, gy):
    """Arctangent (radians, in (-pi/2, pi/2))."""
    x = ctx.x0
    return gy / (x * x + 1)


@elementwise("erf", "erf(x)", saves=("x0",))
def ERF(ctx, gy):
    """Gauss error function."""
    x = ctx.x0
    return gy * (2 / np.sqrt(np.pi)) * exp(-(x * x))


@elementwise("clip", "minimum(maximum(x, lo), hi)", attrs=("lo", "hi"), saves=("x0",))
def CLIP(ctx, gy):
    """Clamp into ``[lo, hi]``; zero gradient outside."""
    x, attrs = ctx.x0, ctx.attrs
    return where(less(x, attrs["lo"]), 0, where(greater(x, attrs["hi"]), 0, gy))


@elementwise("where", "where(c, a, b)", args=("c", "a", "b"), saves=("x0",))
def WHERE(ctx, gy):
    """Pick ``a`` where ``c`` is true, else ``b``."""
    c = ctx.x0
    return None, where(c, gy, 0), where(c, 0, gy)


@elementwise("cast", "astype(x, dtype)", attrs=("dtype",), saves=("x0",))
def CAST(ctx, gy):
    """Convert to ``dtype``."""
    source = ctx.x0.dtype  # saved for its dtype only: casts are rare, nodes stay lean
    return cast(gy, str(source)) if np.dtype(source).kind in "fc" else None


def _comparison(name: str, expr: str) -> Any:
    return elementwise(name, expr, args=_AB, doc=f"Elementwise ``{expr}`` (no gradient).")(None)


GREATER = _comparison("greater", "a > b")
GREATER_EQUAL = _comparison("greater_equal", "a >= b")
LESS = _comparison("less", "a < b")
LESS_EQUAL = _comparison("less_equal", "a <= b")
EQUAL = _comparison("equal", "a == b")
NOT_EQUAL = _comparison("not_equal", "a != b")

add = public_function(ADD)
subtract = public_function(SUBTRACT)
multiply = public_function(MULTIPLY)
divide = public_function(DIVIDE)
negative = public_function(NEGATIVE)
power = public_function(POWER)
maximum = public_function(MAXIMUM)
minimum = public_function(MINIMUM)
remainder = public_function(REMAINDER)
fmod = public_function(FMOD)
floor_divide = public_function(FLOOR_DIVIDE)
exp = public_function(EXP)
log = public_function(LOG)
log1p = public_function(LOG1P)
expm1 = public_function(EXPM1)
sqrt = public_function(SQRT)
rsqrt = public_function(RSQRT)
square = public_function(SQUARE)
abs = public_function(ABS)
sin = public_function(SIN)
cos = public_function(COS)
atan = public_function(ATAN)
erf = public_function(ERF)
where = public_function(WHERE)
greater = public_function(GREATER)
greater_equal = public_function(GREATER_EQUAL)
less = public_function(LESS)
less_equal = public_function(LESS_EQUAL)
equal = public_function(EQUAL)
not_equal = public_function(NOT_EQUAL)
_clip = public_function(CLIP, {"lo": -np.inf, "hi": np.inf})


def clip(x: Any, lo: float | None = None, hi: float | None = None) -> Any:
    """Clamp ``x`` into ``[lo, hi]`` (``None`` means unbounded on that side).

    Example:
        >>> from dualflow import ops
        >>> ops.clip([-2.0, 0.5, 3.0], -1.0, 1.0).tolist()
        [-1.0, 0.5, 1.0]
    """
    return apply(
        CLIP, x, lo=-np.inf if lo is None else float(lo), hi=np.inf if hi is None else float(hi)
    )


def cast(x: Any, dtype: Any) -> Any:
    """Convert ``x`` to ``dtype``; a tensor already of that dtype is returned as is.

    Example:
        >>> from dualflow import ops
        >>> ops.cast([1.7, 2.2], "int32").tolist()
        [1, 2]
    """
    name = np.dtype(dtype).name
    if getattr(x, "dtype", None) == name and hasattr(x, "requires_grad"):
        return x
    return apply(CAST, x, dtype=name)
