"""Fused sums (a region ending in a full ``sum``): numba and blocked-evaluator kernels match eager
numpy (float64 accumulation: within the compiled-vs-eager tolerance, integers exactly) in numpy's
sum dtype and shape, honour ``out=``, name every line on NaN, and their CUDA C compiles with
``nvcc --ptx`` (and, on a GPU, ``cupy.ReductionKernel`` matches numpy).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from dualflow.background.process import using_threads
from dualflow.errors import NumericalError
from dualflow.graph_ir import Graph, GraphBuilder, interpret
from dualflow.kernels.cuda.cuda_fused import (
    cuda_kernel,
    render_cuda_sum,
    wrap_sum_global,
)
from dualflow.kernels.expr.expression import compile_numpy
from dualflow.kernels.expr.typed_program import lower_expr
from dualflow.kernels.fused_cpu import fused_elementwise as kc
from dualflow.kernels.fused_cpu import fused_sum as ks
from dualflow.passes.fuse import fuse
from dualflow.runtime import lower
from dualflow.runtime.memory import plan_memory
from tests.kernels.nvcc import assert_compiles_to_ptx, nvcc_or_skip
from tests.tracer.helpers import tol


@pytest.fixture(autouse=True)
def _fresh_kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUALFLOW_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(kc, "_CACHE", {})  # every test builds (and so chooses) its kernels


def _graph(shapes: list[tuple], dtype: str, keepdims: bool, literal: float = 0.5) -> Graph:
    """``sum((a - literal) * b + a)`` (``b`` only with two shapes), over all axes."""
    b = GraphBuilder("fused_sum")
    xs = [b.input(s, dtype, f"x{i}") for i, s in enumerate(shapes)]
    (h,) = b.node("subtract", [xs[0], literal], loc="m.py:1")
    if len(xs) > 1:
        (h,) = b.node("multiply", [h, xs[1]], loc="m.py:2")
    (h,) = b.node("add", [h, xs[0]], loc="m.py:3")
    b.output(*b.node("sum", [h], {"axis": None, "keepdims": keepdims}, loc="m.py:4"))
    return b.build()


def _inputs(shapes: list[tuple], dtype: str, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(s) * 4).astype(dtype) for s in shapes]


def _check(graph: Graph, inputs: list[np.ndarray]) -> np.ndarray:
    """Run the fused plan; it must equal eager (the interpreter on the unfused graph) within
    ``tol`` relative to the magnitude of the summed elements, integers exactly."""
    fused = fuse(graph, min_size=0)
    assert [n.op for n in fused.nodes] == ["fused"] and fused.nodes[0].attrs["reduce"] == "sum"
    with np.errstate(all="ignore"):
        got = lower(fused).run(inputs, []).outputs[0]
        want = interpret(graph, inputs).outputs[0]
        elements = interpret(graph.replace(outputs=graph.nodes[-1].inputs), inputs).outputs[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want)
    else:
        bound = tol(want.dtype)["rtol"] * float(np.abs(elements.astype(np.float64)).sum())
        np.testing.assert_allclose(got, want, rtol=0, atol=bound)
    return got


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize(
    "shapes",
    [[(20_011,)], [(300, 1), (1, 200)], [(7, 6, 130), (6, 1)], [(40, 50), ()], [(0, 3), (3,)]],
    ids=["flat", "outer", "rows", "scalar", "empty"],
)
def test_plan_matches_eager(dtype: str, keepdims: bool, shapes: list[tuple]) -> None:
    _check(_graph(shapes, dtype, keepdims), _inputs(shapes, dtype))


def test_sum_of_a_million_float32_is_float64_accurate() -> None:
    """Eager float32 pairwise sums err by up to ~1e-7 relative; the fused sum adds in float64,
    so it is float32's rounding of the exact sum (the bench's ((x-y)**2).sum() shape)."""
    shapes = [(1_000_000,), (1_000_000,)]
    x, y = _inputs(shapes, "float32", seed=3)
    b = GraphBuilder("sqdist")
    a, c = b.input(x.shape, "float32"), b.input(y.shape, "float32")
    (s,) = b.node("power", [*b.node("subtract", [a, c]), 2])
    b.output(*b.node("sum", [s], {"axis": None, "keepdims": False}))
    got = _check(b.build(), [x, y])
    exact = np.sum(np.square(x - y).astype(np.float64))
    assert abs(float(got) - exact) <= 0.5 * float(np.spacing(np.float32(exact)))


def _kernel_kind(graph: Graph, shapes: list[tuple], dtype: str) -> str:
    node = fuse(graph, min_size=0).nodes[0]
    metas = tuple((s, dtype) for s in shapes)
    kernel = ks.cpu_sum_kernel(node.attrs["expr"], node.attrs["args"], metas)
    return kernel.__qualname__.split(".")[0]


def test_kernel_choice_numba_blocked_and_short_rows() -> None:
    assert _kernel_kind(_graph([(500, 100)], "float32", False), [(500, 100)], "float32") == (
        "numba_sum_kernel"
    )
    short = [(4000, 3), (1, 3)]  # broadcast rows of 3: per-row cost would dominate numba
    assert _kernel_kind(_graph(short, "float32", False), short, "float32") == "blocked_sum_kernel"
    for op, dtype, kind in [
        ("sin", "float32", "blocked_sum_kernel"),  # numba's scalar libm: slow, not numpy's bits
        ("tanh", "float64", "blocked_sum_kernel"),
        ("tanh", "float32", "numba_sum_kernel"),  # fast_tanh, what eager runs too
        ("exp", "float32", "numba_sum_kernel"),  # fast_exp
    ]:
        b = GraphBuilder(op)
        x = b.input((5000,), dtype)
        b.output(*b.node("sum", [*b.node(op, [x])], {"axis": None, "keepdims": False}))
        assert _kernel_kind(b.build(), [(5000,)], dtype) == kind, (op, dtype)
    _check(_graph(short, "float32", True), _inputs(short, "float32"))


def test_layout_merges_axes_broadcast_alike() -> None:
    assert ks.sum_layout(((2, 3, 4), (2, 3, 4)), (2, 3, 4)) == ((24,), ((24,), (24,)))
    assert ks.sum_layout(((5, 1), (1, 7)), (5, 7)) == ((5, 7), ((5, 1), (1, 7)))
    assert ks.sum_layout(((1, 1), ()), (1, 1)) == ((1,), ((1,), (1,)))
    assert ks.sum_layout(((4, 1, 6), (6,)), (4, 1, 6)) == ((4, 6), ((4, 6), (1, 6)))
    assert ks.sum_layout(((4, 1, 6), (1,)), (4, 1, 6)) == ((24,), ((24,), (1,)))


def test_float16_uses_the_blocked_evaluator() -> None:
    shapes = [(3000,), (3000,)]
    graph = _graph(shapes, "float16", False)
    assert _kernel_kind(graph, shapes, "float16") == "blocked_sum_kernel"
    inputs = _inputs(shapes, "float16")
    got = lower(fuse(graph, min_size=0)).run(inputs, []).outputs[0]
    exact = np.sum(((inputs[0] - 0.5) * inputs[1] + inputs[0]).astype(np.float64))
    assert got.dtype == np.float16 and got.shape == ()
    assert abs(float(got) - exact) <= float(np.spacing(np.float16(exact)))


def test_numba_missing_falls_back_to_blocked(monkeypatch: pytest.MonkeyPatch) -> None:
    import dualflow.kernels.numba

    monkeypatch.setitem(
        sys.modules, "dualflow.kernels.numba.numba_elementwise", None
    )  # import fails
    monkeypatch.delattr(dualflow.kernels.numba, "numba_elementwise", raising=False)
    monkeypatch.setattr(kc, "_warned_no_numba", False)
    shapes = [(300, 1), (1, 200)]
    with pytest.warns(RuntimeWarning, match="numba is not installed"):
        kind = _kernel_kind(_graph(shapes, "float32", False), shapes, "float32")
    assert kind == "blocked_sum_kernel"
    for dtype in ("float64", "int32"):
        _check(_graph(shapes, dtype, True), _inputs(shapes, dtype))


@pytest.mark.parametrize(("shape", "bshape"), [((50_000,), None), ((500, 101), (101,))])
def test_blocked_chunks_and_threads_agree_exactly(
    monkeypatch: pytest.MonkeyPatch, shape: tuple, bshape: tuple | None
) -> None:
    """Per-chunk partial sums added in chunk order: any thread count gives the same bits."""
    monkeypatch.setattr(kc, "BLOCK", 4096)  # many chunks, a short last one
    monkeypatch.setattr(kc, "THREAD_MIN", 1000)
    shapes = [s for s in (shape, bshape) if s]
    graph = _graph(shapes, "float32", False)
    node = fuse(graph, min_size=0).nodes[0]
    program = lower_expr(node.attrs["expr"], node.attrs["args"], ("float32",) * len(shapes))
    inputs = _inputs(shapes, "float32", seed=4)
    results = []
    for threads in (1, 2):
        with using_threads(threads):
            results.append(ks.blocked_sum_kernel(program, shape, ())(np, *inputs))
    assert results[0].tobytes() == results[1].tobytes()
    with np.errstate(all="ignore"):
        want = interpret(graph, inputs).outputs[0]
    np.testing.assert_allclose(results[0], want, rtol=1e-5)


@pytest.mark.parametrize("kind", ["numba", "blocked"])
def test_keepdims_output_is_planned_and_written_in_place(kind: str) -> None:
    """A keepdims sum read by a later step gets a pooled ``out=`` buffer; runs reuse it."""
    b = GraphBuilder("normalize")
    x = b.input((64, 80), "float32", "x")
    (e,) = b.node("sin" if kind == "blocked" else "abs", [x], loc="m.py:1")
    (s,) = b.node("sum", [e], {"axis": None, "keepdims": True}, loc="m.py:2")
    b.output(*b.node("divide", [x, s], loc="m.py:3"))
    graph = fuse(b.build(), min_size=0)
    assert [n.op for n in graph.nodes] == ["fused", "divide"]
    rows = {r.value: r for r in plan_memory(graph).rows}
    assert s.id in rows and rows[s.id].nbytes == 4
    plan = lower(graph)
    inputs = _inputs([(64, 80)], "float32")
    want = interpret(graph, inputs).outputs[0]
    for _ in range(2):
        np.testing.assert_allclose(plan.run(inputs, []).outputs[0], want, rtol=1e-6)
    buffer = plan._buffers[plan.memory.planned.index(s)]
    elements = np.abs(inputs[0]) if kind == "numba" else np.sin(inputs[0])
    np.testing.assert_allclose(buffer, elements.sum(dtype=np.float64, keepdims=True), rtol=1e-6)


def test_debug_nan_names_every_fused_line_and_the_sum() -> None:
    graph = _graph([(100,), (100,)], "float32", False)
    plan = lower(fuse(graph, min_size=0), debug=True)
    bad = _inputs([(100,), (100,)], "float32")
    bad[1][7] = np.nan
    with pytest.raises(NumericalError) as info:
        plan.run(bad, [])
    message = str(info.value)
    assert "fused: output contains NaN" in message
    assert [f"m.py:{i}" in message for i in (1, 2, 3, 4)] == [True] * 4


def _cuda_programs() -> list:
    """Typed element programs of fused sums: float, double, integer power, bool, mixed."""
    a0, a1 = ("var", "a0"), ("var", "a1")
    cases = [
        (("call", "power", ("call", "subtract", a0, a1), ("const", 2)), ("float32", "float32")),
        (("call", "multiply", a0, a1), ("float64", "float64")),
        (("call", "power", a0, ("const", 3)), ("int32",)),
        (("call", "greater", a0, ("const", 0.5)), ("float32",)),
        (("call", "tanh", ("call", "multiply", a0, a1)), ("float32", "int64")),
    ]
    return [(e, d, lower_expr(e, ("a0", "a1")[: len(d)], d)) for e, d in cases]


def test_reduction_source_compiles_with_nvcc(tmp_path: Path) -> None:
    nvcc = nvcc_or_skip()
    sources = [render_cuda_sum(program) for *_, program in _cuda_programs()]
    assert [s.reduce_type for s in sources] == ["double", "double", "long long", "long long"] + [
        "double"
    ]
    assert sources[0].post_map_expr == "out = (float)a" and sources[0].identity == "0"
    assert_compiles_to_ptx(nvcc, tmp_path, "sums", [wrap_sum_global(s) for s in sources])


@pytest.mark.gpu
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduction_kernels_match_numpy_on_gpu(keepdims: bool) -> None:
    import cupy

    rng = np.random.default_rng(12)
    for expr, dtypes, _ in _cuda_programs():
        shapes = [(300, 41), (41,)][: len(dtypes)]
        inputs = [(rng.uniform(0.1, 2.0, s) * 3).astype(d) for s, d in zip(shapes, dtypes)]
        args = ("a0", "a1")[: len(dtypes)]
        kernel = cuda_kernel(expr, args, dtypes, reduce="sum", keepdims=keepdims)
        got = kernel(cupy, *(cupy.asarray(a) for a in inputs)).get()
        elements = np.asarray(compile_numpy(expr, args, ())(np, *inputs))
        want = np.sum(elements, keepdims=keepdims)
        assert got.dtype == want.dtype and got.shape == want.shape, expr
        np.testing.assert_allclose(got, want, rtol=2e-6 if want.dtype == np.float32 else 1e-12)
