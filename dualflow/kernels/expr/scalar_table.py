"""The scalar-function table: every function an elementwise expression may call, one row each.

A row says everything a backend needs about the function: its arity and Python operator, the
numpy/cupy ufunc (which also means it takes ``out=``), whether it is transcendental (the blocked
evaluator runs it: numba's scalar libm is slower than numpy's SIMD loops and not bit-identical),
whether the blocked evaluator may write its result over an operand, how numpy types its loop, and
one rendering per backend: numpy source (``expression.render_numpy``), numba
(``numba_elementwise``), CUDA C (``cuda_render``). Adding a scalar function is adding a row here
(tests/kernels/test_scalar_table.py checks every row on every backend available). float32 ``tanh``
and ``exp`` are dualflow's own vectorized functions on every CPU path (``fast_tanh``, ``fast_exp``),
so numba kernels may compute them.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dualflow.kernels.expr.module_functions import direct, erf, functions_of

Render = Callable[[list[str], Any], str]  # (rendered operands, the typed step) -> source


@dataclass(frozen=True)
class ScalarFunction:
    """One row of the table; ``numba is None`` means regions calling it never go to numba."""

    name: str
    arity: int
    ufunc: str | None  # numpy's and cupy's ufunc of this name: the evaluator calls it with out=
    cuda: Render
    numba: Render | None = None
    symbol: str | None = None  # the Python operator an expression spells it with
    transcendental: bool = False
    inplace: bool = True  # the blocked evaluator writes out= in one pass: out may be an operand
    predicate: bool = False  # the result is a comparison's bool (numba renders it without a cast)
    loop: str = "result"  # numpy's loop type: of the "result", of the "operands", or the "first"'s
    operands: tuple[str, ...] = ()  # per operand "value" (default), "bool" or "dtype" (a name)
    numpy: str | None = None  # numpy source template when it is not ``xp.<ufunc>(...)``
    xp_function: Callable | None = None  # ``f(xp, *operands)``: numpy lacks it or runs ours
    evaluate: Callable | None = None  # ``f(operands, out)`` when it is not the ufunc
    # compute types whose numba rendering calls the function numpy runs too (imported by the
    # line ``numba_import()`` gives): a transcendental step of one of these may go to numba
    vectorized: tuple[str, ...] = ()
    numba_import: Callable[[], str] | None = None
    # never raises a floating-point flag numpy warns about: an eager op made only of such
    # functions runs the same in a kernel (``fused_elementwise.quiet``)
    quiet: bool = False
    # numpy's own loop is slow, so eager calls take the kernel from fewer elements: "always"
    # (where: a branch per element) or "constant" (maximum/minimum with a constant operand)
    slow_in_numpy: str = ""
    # numba would call libm (``pow``), whose bits differ from numpy's: the blocked evaluator
    # runs it (``squares`` steps excepted: ``x * x`` everywhere)
    libm_in_numba: bool = False

    def in_numba(self, ctype: Any) -> bool:
        """Whether a step computed in ``ctype`` may run in a numba kernel.

        Example:
            >>> FUNCTIONS["tanh"].in_numba("float32"), FUNCTIONS["tanh"].in_numba("float64")
            (True, False)
        """
        if self.numba is None:
            return False
        return not self.transcendental or np.dtype(ctype).name in self.vectorized

    @property
    def out(self) -> bool:
        """Whether numpy/cupy compute it as a ufunc taking ``out=``."""
        return self.ufunc is not None

    def kinds(self) -> tuple[str, ...]:
        """What each operand is: ``"value"``, ``"bool"`` (where's condition) or ``"dtype"``."""
        return self.operands or ("value",) * self.arity


def is_two(value: Any) -> bool:
    """Whether a constant is the Python number 2 (``x ** 2`` is ``square`` in eager numpy).

    Example:
        >>> is_two(2), is_two(2.0), is_two(True)
        (True, True, False)
    """
    return isinstance(value, int | float) and not isinstance(value, bool) and value == 2


def squares(step: Any) -> bool:
    """Whether a typed step is ``x ** 2`` computed in floats: numpy's fast path runs ``square``,
    exactly ``x * x``, so every backend must (libm's ``pow`` may differ by an ulp).

    Example:
        >>> from dualflow.kernels.expr.typed_program import lower_expr
        >>> e = ("call", "power", ("var", "a0"), ("const", 2))
        >>> squares(lower_expr(e, ("a0",), ("float32",)).steps[0])
        True
    """
    last = step.operands[-1]
    return (
        step.fn == "power"
        and np.dtype(step.ctype).kind == "f"
        and last[0] == "const"
        and is_two(last[1])
    )


def _suffix(step: Any) -> str:
    return "f" if step.ctype == np.float32 else ""  # C's float functions: tanhf, expf...


def _py_infix(symbol: str) -> Render:
    return lambda o, s: f"{o[0]} {symbol} {o[1]}"


def _c_infix(symbol: str) -> Render:
    return lambda o, s: f"({o[0]} {symbol} {o[1]})"


def _c_math(name: str) -> Render:
    return lambda o, s: f"{name}{_suffix(s)}({', '.join(o)})"


def _keeps_first(cmp: str, either: str) -> Callable[[str, str], str]:
    # numpy's maximum/minimum: a NaN in either operand propagates, and of equal operands (0.0 and
    # -0.0) the second is returned (its x86-64 SIMD loops; tests/kernels/test_scalar_table.py)
    return lambda a, b: f"{a} {cmp} {b} {either} {a} != {a}"


def _py_select(cmp: str) -> Render:
    keep = _keeps_first(cmp, "or")
    return lambda o, s: f"{o[0]} if ({keep(o[0], o[1])}) else {o[1]}"


def _c_select(cmp: str) -> Render:
    keep = _keeps_first(cmp, "||")
    return lambda o, s: f"(({keep(o[0], o[1])}) ? {o[0]} : {o[1]})"


def _py_power(o: list[str], s: Any) -> str:
    return f"{o[0]} * {o[0]}" if squares(s) else f"{o[0]} ** {o[1]}"


def _c_power(o: list[str], s: Any) -> str:
    if np.dtype(s.ctype).kind in "biu":  # CUDA's pow is floating point only
        return f"dualflow_ipow({o[0]}, {o[1]})"
    return f"pow{_suffix(s)}({o[0]}, {o[1]})"


def _c_abs(o: list[str], s: Any) -> str:
    if np.dtype(s.ctype).kind == "f":  # fabs clears the sign of -0.0, as numpy does
        return f"fabs{_suffix(s)}({o[0]})"
    return f"({o[0]} < 0 ? -{o[0]} : {o[0]})"


def _c_division(name: str) -> Render:
    """remainder/fmod/floor_divide in CUDA C: numpy's algorithms (``npy_divmod``; integer
    division by zero gives 0), from the helpers of ``cuda_render.DIVISION_PREAMBLE``."""

    def render(o: list[str], s: Any) -> str:
        kind = "f" if np.dtype(s.ctype).kind == "f" else "i"
        return f"dualflow_{kind}{name}({o[0]}, {o[1]})"

    return render


def _division(name: str, ufunc: str) -> ScalarFunction:
    """A division row: transcendental so fused regions run numpy's ufunc (its divmod rounding and
    its integer division by zero, numba's raise), never a numba rendering."""
    return ScalarFunction(name, 2, ufunc, _c_division(name), transcendental=True)


def _where(operands: list, out: Any) -> Any:
    if out is None:
        return np.where(*operands)
    cond, a, b = operands
    np.copyto(out, b, casting="unsafe")
    np.copyto(out, a, casting="unsafe", where=np.asarray(cond, dtype=bool))
    return out


def _astype(operands: list, out: Any) -> Any:
    x, dtype = operands
    if out is None:
        return np.asarray(x).astype(dtype)
    return np.copyto(out, x, casting="unsafe") or out


def _erf(operands: list, out: Any) -> Any:
    result = erf(np, operands[0])
    return result if out is None else (np.copyto(out, result, casting="unsafe") or out)


# Functions whose numpy float32 loop is dualflow's own vectorized one (numpy's backend gives it:
# ``module_functions``), as (module, scalar numba function): numba kernels inline the same loop
_OWN = {"tanh": ("fast_tanh", "tanh_f32"), "exp": ("fast_exp", "exp_f32")}


@functools.cache
def _own_module(name: str) -> Any:
    return importlib.import_module(f"dualflow.kernels.fast_math.{_OWN[name][0]}")  # imports numba


def _own_function(name: str) -> Callable:
    """``f(xp, x, out=None)``: the function the array module's backend gives for ``name``
    (numpy's: the ufunc with dualflow's float32 loop), else ``xp.<name>``; chosen once per
    module (``module_functions.functions_of``)."""
    chosen: dict[Any, Callable] = {}

    def choose(xp: Any) -> Callable:
        own = functions_of(xp).get(name)
        if own is not None:
            own = direct(own)  # numpy's: fast_math's function itself (imports numba)
        else:
            ufunc = getattr(xp, name)
            own = lambda x, out=None: ufunc(x) if out is None else ufunc(x, out=out)  # noqa: E731
        chosen[xp] = own
        return own

    def function(xp: Any, x: Any, out: Any = None) -> Any:
        run = chosen.get(xp)
        return (run or choose(xp))(x, out)

    return function


def _own_row(name: str) -> ScalarFunction:
    """A ufunc row whose float32 loop is dualflow's vectorized function (``_OWN``): numba
    kernels may inline it (other compute types stay transcendental: the blocked evaluator)."""
    function, scalar = _own_function(name), _OWN[name][1]

    def numba(o: list[str], s: Any) -> str:
        if np.dtype(s.ctype) != np.float32:  # numba would call libm: not numpy's bits
            raise NotImplementedError(f"no numba {name} for {np.dtype(s.ctype)}")
        return f"{scalar}({o[0]})"

    return ScalarFunction(
        name,
        1,
        name,
        _c_math(name),
        numba,
        transcendental=True,
        xp_function=function,  # takes out= as the ufunc does
        evaluate=lambda operands, out: function(np, operands[0], out),
        vectorized=("float32",),
        numba_import=lambda: _own_module(name).IMPORT,
    )


def _arithmetic(name: str, symbol: str) -> ScalarFunction:
    return ScalarFunction(name, 2, name, _c_infix(symbol), _py_infix(symbol), symbol)


def _comparison(name: str, symbol: str) -> ScalarFunction:
    render = _py_infix(symbol)
    return ScalarFunction(
        name, 2, name, _c_infix(symbol), render, symbol, predicate=True, loop="operands", quiet=True
    )


def _select(name: str, cmp: str) -> ScalarFunction:
    """maximum/minimum: NaN-propagating selects, quiet, slow in numpy with a constant operand."""
    return ScalarFunction(
        name, 2, name, _c_select(cmp), _py_select(cmp), quiet=True, slow_in_numpy="constant"
    )


def _math(name: str, numba: Render | None = None) -> ScalarFunction:
    return ScalarFunction(name, 1, name, _c_math(name), numba, transcendental=numba is None)


TABLE: tuple[ScalarFunction, ...] = (
    _arithmetic("add", "+"),
    _arithmetic("subtract", "-"),
    _arithmetic("multiply", "*"),
    _arithmetic("divide", "/"),
    ScalarFunction("power", 2, "power", _c_power, _py_power, "**", libm_in_numba=True),
    ScalarFunction(
        "negative", 1, "negative", lambda o, s: f"(-{o[0]})", lambda o, s: f"-{o[0]}", quiet=True
    ),
    _select("maximum", ">"),
    _select("minimum", "<"),
    _division("remainder", "remainder"),
    _division("fmod", "fmod"),
    _division("floor_divide", "floor_divide"),
    _comparison("greater", ">"),
    _comparison("greater_equal", ">="),
    _comparison("less", "<"),
    _comparison("less_equal", "<="),
    _comparison("equal", "=="),
    _comparison("not_equal", "!="),
    ScalarFunction(
        "where",
        3,
        None,
        lambda o, s: f"({o[0]} ? {o[1]} : {o[2]})",
        lambda o, s: f"{o[1]} if {o[0]} else {o[2]}",
        inplace=False,  # two copyto passes
        operands=("bool", "value", "value"),
        numpy="xp.where({0}, {1}, {2})",
        evaluate=_where,
        quiet=True,
        slow_in_numpy="always",
    ),
    _own_row("exp"),
    _math("log"),
    _math("log1p"),
    _math("expm1"),
    _math("sqrt", lambda o, s: f"math.sqrt({o[0]})"),  # IEEE sqrt: exact everywhere
    ScalarFunction("abs", 1, "abs", _c_abs, lambda o, s: f"abs({o[0]})", quiet=True),
    _math("sin"),
    _math("cos"),
    _own_row("tanh"),
    ScalarFunction("atan", 1, "arctan", _c_math("atan"), transcendental=True),
    ScalarFunction(
        "erf",
        1,
        None,  # numpy has none (a numba ufunc over libm's erf, see special.py): no out=
        _c_math("erf"),
        transcendental=True,
        inplace=False,  # computed, then copied into out
        xp_function=erf,
        evaluate=_erf,
    ),
    ScalarFunction(
        "astype",
        2,
        None,
        lambda o, s: o[0],  # the step's result type is the cast
        lambda o, s: o[0],
        inplace=False,
        loop="first",
        operands=("value", "dtype"),
        numpy="xp.asarray({0}).astype({1})",
        evaluate=_astype,
    ),
)

FUNCTIONS: dict[str, ScalarFunction] = {row.name: row for row in TABLE}
BY_SYMBOL: dict[str, str] = {row.symbol: row.name for row in TABLE if row.symbol}
