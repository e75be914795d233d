"""Fused CPU kernels: the blocked evaluator is bit-identical to eager numpy, numba kernels are exact
on arithmetic chains (no reassociation, float32 stays float32), take operands of any layout, write
into ``out`` even over their input, and load from the disk cache in a second process. (The CUDA
renderings: test_fused_kernels_cuda.py.)
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from dualflow.background.process import using_threads
from dualflow.graph_ir import Graph, interpret
from dualflow.kernels.expr.expression import compile_numpy, parse_expr
from dualflow.kernels.expr.typed_program import apply_numpy, lower_expr
from dualflow.kernels.fused_cpu import fused_elementwise as kc
from dualflow.kernels.numba import numba_elementwise
from dualflow.passes.fuse import fuse
from dualflow.runtime import lower
from tests.kernels.fused_programs import arith_chain, tanh_chain


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DUALFLOW_CACHE_DIR", str(tmp_path))
    return tmp_path


def _run_both(graph: Graph, inputs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    fused = fuse(graph, min_size=0)
    assert [n.op for n in fused.nodes] == ["fused"]
    got = lower(fused).run(inputs, []).outputs[0]
    want = interpret(graph, inputs).outputs[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    return got, want


@pytest.mark.parametrize(
    ("shape", "bshape"), [((200_003,), None), ((3,), None), ((300, 701), (701,))]
)
def test_blocked_evaluator_bit_identical(shape: tuple, bshape: tuple | None) -> None:
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in (shape, bshape) if s]
    got, want = _run_both(tanh_chain(shape, bshape), inputs)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("shape", "bshape"), [((100_000,), None), ((64, 33), (1, 33))])
def test_numba_arithmetic_chain_exact(dtype: str, shape: tuple, bshape: tuple | None) -> None:
    """No fastmath: each step rounds in the numpy dtype, so results are exactly eager's."""
    rng = np.random.default_rng(2)
    inputs = [rng.standard_normal(s).astype(dtype) for s in (shape, bshape) if s]
    inputs[0].reshape(-1)[:3] = [np.nan, 0.0, -np.inf]
    with np.errstate(all="ignore"):
        got, want = _run_both(arith_chain(shape, dtype, bshape), inputs)
    np.testing.assert_array_equal(got, want)
    assert list(Path(os.environ["DUALFLOW_CACHE_DIR"], "kernels").glob("k_*.py"))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_power_is_numpys_pow_bit_identical(dtype: str) -> None:
    """numba's ``**`` is libm's pow, up to 1 ulp from numpy's: a power other than ``x ** 2``
    sends the region to the blocked evaluator, which runs numpy's own."""
    expr = ("call", "add", ("call", "power", ("var", "a0"), ("const", 1.5)), ("const", 1.0))
    x = np.random.default_rng(3).uniform(0, 4, 10_000).astype(dtype)
    program = lower_expr(expr, ("a0",), (dtype,))
    assert kc._numba_or_none(program, ((10_000,),), (10_000,)) is None
    got = kc.cpu_kernel(expr, ("a0",), (((10_000,), dtype),))(np, x)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, np.add(np.power(x, 1.5), 1.0))


def test_numba_missing_falls_back_with_one_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    import dualflow.kernels.numba

    monkeypatch.setitem(
        sys.modules, "dualflow.kernels.numba.numba_elementwise", None
    )  # import fails
    monkeypatch.delattr(dualflow.kernels.numba, "numba_elementwise", raising=False)
    monkeypatch.setattr(kc, "_CACHE", {})
    monkeypatch.setattr(kc, "_warned_no_numba", False)
    expr = ("call", "add", ("call", "multiply", ("var", "a0"), ("const", 2)), ("const", 1))
    with pytest.warns(RuntimeWarning, match="numba is not installed"):
        kernel = kc.cpu_kernel(expr, ("a0",), (((4,), "int64"),))
    assert kernel(np, np.arange(4)).tolist() == [1, 3, 5, 7]


_SECOND_PROCESS = """
import time, numpy as np
import numba
numba.njit(lambda: 1)()  # numba and LLVM set up before timing: the clock measures the kernel
from dualflow.kernels.fused_cpu.fused_elementwise import cpu_kernel
expr = ("call", "subtract", ("call", "multiply", ("var", "a0"), ("const", 0.75)),
        ("call", "multiply", ("var", "a0"), ("var", "a0")))
t0 = time.perf_counter()
kernel = cpu_kernel(expr, ("a0",), (((5000,), "float32"),))
out = kernel(np, np.ones(5000, np.float32))
elapsed = time.perf_counter() - t0
from dualflow.kernels.numba import numba_elementwise
(module,) = numba_elementwise._MODULES.values()
stats = module.kernel.stats
print(sum(stats.cache_hits.values()), sum(stats.cache_misses.values()), elapsed, out[0])
"""


def test_numba_disk_cache_reused_by_second_process(tmp_path: Path) -> None:
    env = {**os.environ, "DUALFLOW_CACHE_DIR": str(tmp_path)}
    runs = [
        subprocess.run(
            [sys.executable, "-c", textwrap.dedent(_SECOND_PROCESS)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        for _ in range(2)
    ]
    (first_hits, first_misses, _, value), (hits, misses, elapsed, value2) = runs
    assert (first_hits, first_misses) == ("0", "1")  # compiled, then saved
    assert (hits, misses) == ("1", "0")  # loaded from disk: nothing compiled
    # hits/misses prove nothing was compiled; no time limit (a loaded machine is not a failure)
    assert float(elapsed) >= 0 and value == value2 == "-0.25"
    assert len(list((tmp_path / "kernels").glob("k_*.py"))) == 1


def _special_values(n: int, seed: int) -> np.ndarray:
    """Normals, huge and tiny magnitudes, random bit patterns, NaN, ±inf and ±0 (float32)."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**32, n // 4, dtype=np.uint32).view(np.float32)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, 3e-39, 1.9e19], np.float32)
    normal = rng.standard_normal(n - bits.size - special.size).astype(np.float32)
    return rng.permutation(np.concatenate([normal * 10, bits, special]))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("shape", "bshape"), [((40_000,), None), ((400, 101), (101,))])
def test_blocked_chunks_and_threads_bit_identical(
    monkeypatch: pytest.MonkeyPatch, threads: int, shape: tuple, bshape: tuple | None
) -> None:
    """Many chunks (a short last one), split over threads, NaN/inf inputs: still eager's bits."""
    monkeypatch.setattr(kc, "BLOCK", 4096)
    monkeypatch.setattr(kc, "THREAD_MIN", 1000)
    monkeypatch.setattr(kc, "_CACHE", {})
    sizes = [int(np.prod(s)) for s in (shape, bshape) if s]
    shapes = [s for s in (shape, bshape) if s]
    inputs = [_special_values(n, k).reshape(s) for k, (n, s) in enumerate(zip(sizes, shapes))]
    with np.errstate(all="ignore"):
        graph = tanh_chain(shape, bshape)
        fused = fuse(graph, min_size=0)
        program = lower_expr(
            fused.nodes[0].attrs["expr"], fused.nodes[0].attrs["args"], ("float32",) * len(inputs)
        )
        with using_threads(threads):
            got = kc.blocked_kernel(program, shape, 4096)(np, *inputs)
        want = interpret(graph, inputs).outputs[0]
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))


def test_blocked_schedule_reuses_temporaries() -> None:
    """Ten steps of the tanh chain need two chunk temporaries, the last writes the output."""
    node = fuse(tanh_chain((8,)), min_size=0).nodes[0]
    program = lower_expr(node.attrs["expr"], node.attrs["args"], ("float32",))
    steps, dtypes = kc._schedule(program)
    assert len(program.steps) == 10 and len(dtypes) == 2
    assert steps[-1][2] == -1


@pytest.mark.parametrize("exponent", [2, 2.0])
@pytest.mark.parametrize("transcendental", [False, True])
def test_square_power_exact(exponent: float, transcendental: bool) -> None:
    """``x ** 2`` is numpy's ``square`` in eager mode; both fused backends give the same bits."""
    x = _special_values(50_000, 7)
    body = ("call", "power", ("var", "a0"), ("const", exponent))
    if transcendental:
        body = ("call", "add", body, ("call", "sin", ("var", "a0")))  # the blocked evaluator
    expr = ("call", "subtract", body, ("const", 1.0))
    got = kc.cpu_kernel(expr, ("a0",), (((x.size,), "float32"),))(np, x)
    with np.errstate(all="ignore"):
        want = x**exponent + np.sin(x) if transcendental else x**exponent
        want = want - 1.0
    np.testing.assert_array_equal(got, want.astype(np.float32))


@pytest.mark.parametrize("kind", ["blocked", "numba"])
@pytest.mark.parametrize(("shape", "bshape"), [((40_000,), None), ((400, 101), (101,))])
def test_fused_kernels_write_into_out_even_over_their_input(
    monkeypatch: pytest.MonkeyPatch, kind: str, shape: tuple, bshape: tuple | None
) -> None:
    """``out=`` a fresh buffer, or the same-shape input itself (in place): eager's bits."""
    monkeypatch.setattr(kc, "BLOCK", 4096)  # many chunks, a short last one
    monkeypatch.setattr(kc, "THREAD_MIN", 1000)
    monkeypatch.setattr(kc, "_CACHE", {})
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in (shape, bshape) if s]
    build = tanh_chain if kind == "blocked" else (lambda s, b: arith_chain(s, "float32", b))
    graph = build(shape, bshape)
    node = fuse(graph, min_size=0).nodes[0]
    metas = tuple((a.shape, "float32") for a in inputs)
    kernel = kc.cpu_kernel(node.attrs["expr"], node.attrs["args"], metas)
    with np.errstate(all="ignore"):
        want = interpret(graph, inputs).outputs[0]
        fresh = np.empty(shape, np.float32)
        assert kernel(np, *inputs, out=fresh) is fresh
        alias = inputs[0].copy()
        kernel(np, alias, *inputs[1:], out=alias)
    np.testing.assert_array_equal(fresh, want)
    np.testing.assert_array_equal(alias, want)


def test_float16_regions_use_the_blocked_evaluator() -> None:
    # numba has no float16: a fused cast/scale region with float16 must still run, exactly
    expr = (
        "call",
        "multiply",
        ("call", "astype", ("var", "a0"), ("const", "float32")),
        ("const", 0.5),
    )
    x = np.linspace(-3, 3, 5000).astype(np.float16)
    kernel = kc.cpu_kernel(expr, ("a0",), (((5000,), "float16"),))
    np.testing.assert_array_equal(kernel(np, x), x.astype(np.float32) * 0.5)


def test_blocked_schedule_value_read_twice_keeps_its_own_slot() -> None:
    """``s + s`` releases s's scratch slot once: two later live values never share it (a reused
    slot once made a training step's gradient 8.49 where eager gives 0.0036)."""
    s = ("call", "sin", ("var", "a0"))
    h = ("call", "tanh", ("var", "a0"))
    expr = ("call", "add", ("call", "add", s, s), ("call", "multiply", h, ("call", "cos", h)))
    program = lower_expr(expr, ("a0",), ("float32",))
    x = np.linspace(-3, 3, 3 * 4096 + 5, dtype=np.float32)
    got = kc.blocked_kernel(program, x.shape, 4096)(np, x)
    sx, hx = np.sin(x), apply_numpy("tanh", [x])  # eager's tanh (float32: fast_tanh)
    np.testing.assert_array_equal(got, (sx + sx) + hx * np.cos(hx))


@pytest.mark.parametrize("bound", [-np.inf, np.inf, np.nan])
def test_non_finite_constants_render_in_every_cpu_kernel(bound: float) -> None:
    # clip's gradient with lo=-inf fused a ("const", -inf) leaf: numpy's rendering wrote ``-inf``
    # (a NameError), numba's ``float('-inf')``; both now share expr.number_source
    below = ("call", "less", ("var", "a0"), ("const", bound))
    expr = ("call", "where", below, ("const", 0), ("var", "a1"))
    x = np.array([-np.inf, -1.0, 0.0, 2.0, np.nan], np.float32)
    g = np.arange(5, dtype=np.float32)
    want = np.where(np.less(x, bound), 0, g)
    metas = (((5,), "float32"), ((5,), "float32"))
    for got in (
        compile_numpy(expr, ("a0", "a1"), ())(np, x, g),
        kc.cpu_kernel(expr, ("a0", "a1"), metas)(np, x, g),
        kc.blocked_kernel(lower_expr(expr, ("a0", "a1"), ("float32", "float32")), (5,))(np, x, g),
    ):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("rows", [6, -(-numba_elementwise.UNFLATTENED_MAX // 5)])
@pytest.mark.parametrize(
    "layout", ["c", "transposed", "reversed", "broadcast", "numpy scalar", "zero-d"]
)
def test_flat_kernels_take_operands_of_any_layout(layout: str, rows: int) -> None:
    """A small call passes its arrays unflattened, a bigger one 1-D views; the kernel flattens
    C arrays itself and the runner copies any other layout C-ordered first, so every layout
    gives the values eager's ufuncs give."""
    args = ("a", "b")
    expr = parse_expr("a * b + a", args)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((rows, 5)).astype(np.float32)
    b = {
        "c": lambda: rng.standard_normal((rows, 5)).astype(np.float32),
        "transposed": lambda: rng.standard_normal((5, rows)).astype(np.float32).T,
        "reversed": lambda: rng.standard_normal((rows, 5)).astype(np.float32)[::-1, ::-1],
        "broadcast": lambda: np.broadcast_to(np.float32(1.5), (rows, 5)),
        "numpy scalar": lambda: np.float32(1.5),
        "zero-d": lambda: np.array(1.5, np.float32),
    }[layout]()
    kc._CACHE.clear()  # this call's metas build a fresh kernel
    kernel = kc.cpu_kernel(expr, args, ((a.shape, "float32"), (np.shape(b), "float32")))
    out = np.empty((rows, 5), np.float32)
    assert kernel(np, a, b, out=out) is out
    np.testing.assert_array_equal(out, a * b + a)
    np.testing.assert_array_equal(kernel(np, a, b), a * b + a)


def test_flat_kernels_of_every_rank_share_one_signature_from_unflattened_max() -> None:
    """numba compiles a kernel once per operand rank: from ``UNFLATTENED_MAX`` elements every
    call passes 1-D views, so a 2-D, 3-D and 4-D call of one expression compile once."""
    args = ("a", "b")
    expr = parse_expr("a * b - b", args)
    program = lower_expr(expr, args, ("float64", "float64"))
    kernel = numba_elementwise.load_module(
        numba_elementwise.render_source(program, (True, True))[0]
    ).kernel
    size = numba_elementwise.UNFLATTENED_MAX
    for shape in [(size,), (size // 8, 8), (2, size // 16, 8), (2, 2, size // 32, 8)]:
        a, b = np.full(shape, 3.0), np.full(shape, 0.5)
        got = kc.cpu_kernel(expr, args, ((shape, "float64"), (shape, "float64")))(np, a, b)
        assert got.shape == shape and (got == 1.0).all()
    assert [sig[0].ndim for sig in kernel.signatures] == [1]
