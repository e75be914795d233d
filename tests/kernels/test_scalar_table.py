"""The scalar-function table: every row renders and evaluates identically on every backend here.

Per row and dtype, on inputs with signed zeros, infinities and NaN: eager numpy (the rendered
expression), the one-call evaluator, the blocked evaluator, the ``out=`` forward and, for rows
with a numba rendering, numba give the same bits; every row's CUDA C compiles with
``nvcc --ptx`` (on a GPU, tests/gpu and test_fused_kernels_cuda run it against numpy).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dualflow.kernels.cuda.cuda_render import render_cuda, wrap_global
from dualflow.kernels.expr.expression import FUNCTIONS, check_expr, compile_numpy, parse_expr
from dualflow.kernels.expr.out_forwards import expression_out
from dualflow.kernels.expr.scalar_table import TABLE, ScalarFunction
from dualflow.kernels.expr.typed_program import Program, Step, apply_numpy, lower_expr
from dualflow.kernels.fused_cpu.fused_elementwise import blocked_kernel
from dualflow.kernels.numba import numba_elementwise
from tests.kernels.nvcc import assert_compiles_to_ptx, nvcc_or_skip

DTYPES = ("float32", "float64", "int32", "int64")
ARGS = ("a0", "a1", "a2")
_FLOATS = [-2.5, -1.0, -0.0, 0.0, 0.5, 1.0, 2.0, 3.5, np.inf, -np.inf, np.nan, 1e-30]


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUALFLOW_CACHE_DIR", str(tmp_path))


def _expr(row: ScalarFunction, dtype: str) -> tuple:
    """``row(a0, a1, ...)``; astype's target is the other float (ints: float64)."""
    operands: list[tuple] = []
    for k, kind in enumerate(row.kinds()):
        if kind == "dtype":
            target = {"float32": "float64"}.get(
                dtype, "float32" if dtype == "float64" else "float64"
            )
            operands.append(("const", target))
        else:
            operands.append(("var", ARGS[k]))
    return ("call", row.name, *operands)


def _in_dtypes(row: ScalarFunction, dtype: str) -> tuple[str, ...]:
    return tuple("bool" if kind == "bool" else dtype for kind in row.kinds() if kind != "dtype")


def _inputs(row: ScalarFunction, dtype: str, rng: np.random.Generator) -> list[np.ndarray]:
    """Every pair of special values (and their swap), plus random ones; integers keep integer
    powers non-negative (numpy raises for negative ones) and casts finite."""
    size = len(_FLOATS) ** 2
    arrays = []
    for k, d in enumerate(_in_dtypes(row, dtype)):
        if d == "bool":
            arrays.append(rng.random(size) > 0.5)
        elif np.dtype(d).kind == "f":
            grid = np.array(_FLOATS)
            values = np.repeat(grid, len(grid)) if k == 0 else np.tile(grid, len(grid))
            if row.name == "astype":
                values = np.nan_to_num(values, posinf=7.0, neginf=-7.0)
            arrays.append(values.astype(d))
        else:
            low = 0 if row.name == "power" and k == 1 else -6
            arrays.append(rng.integers(low, 7, size).astype(d))
    return arrays


def _program(row: ScalarFunction, dtype: str) -> Program | None:
    """The typed one-step program, or None when numpy rejects these input types."""
    try:
        return lower_expr(
            _expr(row, dtype), ARGS[: len(_in_dtypes(row, dtype))], _in_dtypes(row, dtype)
        )
    except (TypeError, ValueError):
        return None


def same_bits(got: Any, want: Any) -> bool:
    """Equal shape, dtype and bits (a NaN equals any NaN)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if got.dtype.kind != "f":
        return bool(np.array_equal(got, want))
    nan = np.isnan(want)
    return bool(np.array_equal(np.isnan(got), nan)) and got[~nan].tobytes() == want[~nan].tobytes()


CASES = [(row, d) for row in TABLE for d in DTYPES]


def test_the_parser_knows_every_row_and_only_those() -> None:
    assert {row.name: row.arity for row in TABLE} == FUNCTIONS
    for row in TABLE:
        assert len(row.kinds()) == row.arity, row.name
        # transcendental rows go blocked, but in the types where numpy runs dualflow's own
        # vectorized function, which the numba rendering calls (and imports)
        if row.transcendental and row.numba:
            assert row.vectorized and row.numba_import is not None, row.name
        check_expr(_expr(row, "float32"), ARGS)
        if row.symbol is not None:  # spelled with its Python operator, it parses to itself
            assert parse_expr(f"a0 {row.symbol} a1", ARGS) == _expr(row, "float32")


@pytest.mark.parametrize("row, dtype", CASES, ids=[f"{r.name}-{d}" for r, d in CASES])
def test_every_numpy_evaluator_gives_eager_bits(row: ScalarFunction, dtype: str) -> None:
    """Eager numpy (the rendered expression), the one-call evaluator, the blocked evaluator
    (into a fresh array and in place) and the ``out=`` forward agree bit for bit."""
    program = _program(row, dtype)
    if program is None:
        pytest.skip(f"numpy has no {row.name} for {dtype}")
    args = ARGS[: len(program.in_dtypes)]
    inputs = _inputs(row, dtype, np.random.default_rng(0))
    with np.errstate(all="ignore"):
        eager = np.asarray(compile_numpy(_expr(row, dtype), args, ())(np, *inputs))
        consts = [e[1] for e in _expr(row, dtype)[2:] if e[0] == "const"]
        assert same_bits(apply_numpy(row.name, [*inputs, *consts]), eager)
        blocked = blocked_kernel(program, eager.shape, block=16)
        assert same_bits(blocked(np, *inputs), eager)
        if row.inplace and inputs[0].dtype == eager.dtype:
            target = inputs[0].copy()
            assert same_bits(blocked(np, target, *inputs[1:], out=target), eager)
        forward_out = expression_out(row.name, _expr(row, dtype), args, ())
        assert (forward_out is not None) == row.out
        if forward_out is not None:
            buffer = np.empty_like(eager)
            assert forward_out(np, *inputs, out=buffer) is buffer and same_bits(buffer, eager)


def _numba_programs(dtype: str) -> list[tuple[ScalarFunction, Program]]:
    found = []
    for row in TABLE:
        program = _program(row, dtype) if row.numba is not None else None
        if program is None or not row.in_numba(program.steps[-1].ctype):
            continue
        if row.name == "power" and dtype.startswith("float"):  # numba runs floats' x ** 2 only
            program = lower_expr(("call", "power", ("var", "a0"), ("const", 2)), ARGS, (dtype,))
        found.append((row, program))
    return found


def _numba_module(programs: list[Program]) -> Any:
    """One numba kernel per program, rendered from the table by ``numba_elementwise``: a module."""
    consts: list[tuple] = []
    bodies = []
    for j, program in enumerate(programs):
        count = len(program.in_dtypes)
        names = ", ".join(f"in{k}" for k in range(count))
        lines = [f"def kernel{j}(out, {names}):", "    for i in range(out.shape[0]):"]
        lines += [f"        x{k} = in{k}[i]" for k in range(count)]
        lines += ["        " + s for s in numba_elementwise.render_steps(program, consts)]
        lines += [f"        out[i] = t{len(program.steps) - 1}", "", ""]
        bodies.append("\n".join(lines))
    imports = tuple(sorted({line for p in programs for line in numba_elementwise.imports(p)}))
    head = "\n".join(
        numba_elementwise.header(consts, imports)[:-1]
    )  # constants; decorators per kernel
    source = head + "".join(f"{numba_elementwise.NJIT}\n{body}" for body in bodies)
    return numba_elementwise.load_module(source)


@pytest.mark.parametrize("dtype", DTYPES)
def test_numba_renderings_give_eager_bits(dtype: str) -> None:
    """Every row numba renders, compiled from the table's rendering, gives numpy's bits."""
    cases = _numba_programs(dtype)
    assert {row.name for row, _ in cases} >= {"add", "maximum", "where", "abs", "negative"}
    module = _numba_module([program for _, program in cases])
    rng = np.random.default_rng(1)
    for j, (row, program) in enumerate(cases):
        inputs = _inputs(row, dtype, rng)[: len(program.in_dtypes)]
        expr = _expr(row, dtype) if row.name != "power" or dtype.startswith("int") else None
        expr = expr or ("call", "power", ("var", "a0"), ("const", 2))
        with np.errstate(all="ignore"):
            want = np.asarray(compile_numpy(expr, ARGS[: len(inputs)], ())(np, *inputs))
        got = np.empty_like(want)
        getattr(module, f"kernel{j}")(got, *inputs)
        assert same_bits(got, want), (row.name, dtype, inputs, got, want)


def test_every_row_compiles_to_cuda_with_nvcc(tmp_path: Path) -> None:
    """All rows in all dtypes in one .cu file; ``nvcc --ptx`` takes it."""
    nvcc = nvcc_or_skip()
    kernels = {}
    for row, dtype in CASES:
        program = _program(row, dtype)
        if program is not None:
            source = render_cuda(program)
            kernels[source.name] = wrap_global(source)
    assert len(kernels) >= len(TABLE)
    assert_compiles_to_ptx(nvcc, tmp_path, "table", list(kernels.values()))


def test_the_square_rule_is_one_rule() -> None:
    """``x ** 2`` in floats is ``x * x`` for every backend; other powers are libm's."""
    two = lower_expr(("call", "power", ("var", "a0"), ("const", 2)), ARGS, ("float32",)).steps[0]
    three = Step("power", (("in", 0), ("const", 3)), two.dtype, two.ctype)
    ints = lower_expr(("call", "power", ("var", "a0"), ("const", 2)), ARGS, ("int32",)).steps[0]
    assert numba_elementwise._statement(two, ["x0", "_c0"]) == "np.float32(x0 * x0)"
    assert numba_elementwise._statement(three, ["x0", "_c0"]) == "np.float32(x0 ** _c0)"
    assert numba_elementwise._statement(ints, ["x0", "_c0"]) == "np.int32(x0 ** _c0)"
    x = np.float32([3.0, 1e20])
    with np.errstate(over="ignore"):
        assert same_bits(apply_numpy("power", [x, 2]), np.square(x))


def test_compiled_relu_of_negative_zero_matches_eager() -> None:
    """The numba kernel of a fused region with ``maximum`` returns numpy's operand at ties:
    ``relu(-0.0)`` is ``+0.0``, so ``1 / relu(x)`` is ``+inf`` eager and compiled."""
    import dualflow
    from dualflow import ops

    def step(x: Any) -> Any:
        return 1.0 / ops.relu(x * 1.0) - x

    x = dualflow.tensor(-np.zeros(8192, np.float32))
    compiled = dualflow.compile(step, fallback="error")
    with np.errstate(divide="ignore"):
        eager = step(x).numpy()
        for _ in range(3):  # trace, then plan runs (a fused numba kernel)
            assert same_bits(compiled(x).numpy(), eager)
    assert np.isposinf(eager).all()
