"""The rendered CUDA C of every fused pattern: the patterns cover every elementwise op, each
compiles with ``nvcc --ptx`` (skipped without nvcc), and on a GPU matches numpy when cupy runs it;
a dtype with no CUDA C type still runs, through the array module.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dualflow.graph_ir import GraphBuilder
from dualflow.kernels.cuda.cuda_fused import (
    cuda_kernel,
    render_cuda,
    render_cuda_sum,
    wrap_global,
    wrap_sum_global,
)
from dualflow.kernels.expr.expression import FUNCTIONS, compile_numpy
from tests.kernels.fused_programs import (
    Fused,
    all_fused,
    arith_chain,
    elementwise_ops,
    fused_nodes,
    tanh_chain,
)
from tests.kernels.nvcc import assert_compiles_to_ptx, nvcc_or_skip


def _test_graph_programs(dtype: str) -> list[Fused]:
    """The fused nodes of this module's own test graphs, float inputs in ``dtype``."""
    b = GraphBuilder("mixed")
    x, i = b.input((8,), dtype), b.input((8,), "int32")
    (c,) = b.node("cast", [i], {"dtype": dtype})
    (e,) = b.node("gelu", [x])
    (e,) = b.node("elu", [e], {"alpha": 1.0})
    (e,) = b.node("clip", [e], {"lo": -1.0, "hi": float("inf")})
    b.output(*b.node("add", [*b.node("multiply", [e, c]), *b.node("softplus", [x])]))
    graphs = [
        tanh_chain((8,), dtype=dtype),
        tanh_chain((4, 8), (8,), dtype=dtype),
        arith_chain((4, 8), dtype, (1, 8)),
        b.build(),
    ]
    return [f for graph in graphs for f in fused_nodes(graph)]


@pytest.fixture(scope="module", params=["float32", "float64"])
def fused_by_origin(request: pytest.FixtureRequest) -> tuple[str, dict[str, list[Fused]]]:
    """(dtype, fused nodes by origin): the test graphs, one region per elementwise op, and the
    regions of every op-table entry's traced forward and gradient."""
    found = {"tests:graphs": _test_graph_programs(request.param), **all_fused(request.param)}
    return request.param, found


def test_fused_patterns_cover_every_elementwise_op(
    fused_by_origin: tuple[str, dict[str, list[Fused]]],
) -> None:
    dtype, found = fused_by_origin
    missing = [name for name in elementwise_ops() if not found[f"op:{name}"]]
    assert not missing, f"no fused region made for {missing}"
    steps = {s.fn for nodes in found.values() for f in nodes for s in f.program().steps}
    assert set(FUNCTIONS) <= steps, f"expression functions never rendered: {set(FUNCTIONS) - steps}"
    floats = {d for nodes in found.values() for f in nodes for d in f.dtypes if d.startswith("f")}
    assert dtype in floats and len([k for k in found if k.startswith("table:")]) >= 20


def test_cuda_source_compiles_with_nvcc(
    tmp_path: Path, fused_by_origin: tuple[str, dict[str, list[Fused]]]
) -> None:
    """One .cu file per dtype holding every distinct rendered kernel; ``nvcc --ptx`` takes it."""
    nvcc = nvcc_or_skip()
    dtype, found = fused_by_origin
    kernels: dict[str, str] = {}
    for nodes in found.values():
        for fused in nodes:
            source = render_cuda(fused.program())
            kernels[source.name] = wrap_global(source)
            if fused.reduce is not None:  # the fused sum's map function and reduction too
                reduction = render_cuda_sum(fused.program())
                kernels[reduction.name] = wrap_sum_global(reduction)
    assert any(f.reduce == "sum" for nodes in found.values() for f in nodes)
    if dtype == "float32":
        assert "tanhf(" in render_cuda(found["op:tanh"][0].program()).operation
    assert_compiles_to_ptx(nvcc, tmp_path, f"fused_{dtype}", list(kernels.values()))


@pytest.mark.gpu
def test_cuda_kernels_match_numpy_on_gpu(
    fused_by_origin: tuple[str, dict[str, list[Fused]]],
) -> None:
    """Every rendered kernel run by ``cupy.ElementwiseKernel`` (``ReductionKernel`` for a fused
    sum) against the numpy expression."""
    import cupy

    dtype, found = fused_by_origin
    rng = np.random.default_rng(11)
    rtol, atol = (2e-5, 1e-6) if dtype == "float32" else (1e-12, 1e-14)
    for origin, nodes in found.items():
        for fused in nodes:
            inputs = [_sample_input(rng, d, s) for d, s in zip(fused.dtypes, fused.shapes)]
            want = np.asarray(compile_numpy(fused.expr, fused.args, ())(np, *inputs))
            kernel = cuda_kernel(fused.expr, fused.args, fused.dtypes, reduce=fused.reduce)
            got = kernel(cupy, *(cupy.asarray(a) for a in inputs)).get()
            if fused.reduce is not None:
                want = np.sum(want)
            assert got.dtype == want.dtype and got.shape == want.shape, origin
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=origin)


def _sample_input(rng: np.random.Generator, dtype: str, shape: tuple) -> np.ndarray:
    # positive floats keep log/sqrt/power inside their domain, as the op table's samples do
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 4, shape).astype(dtype)
    return rng.uniform(0.1, 2.0, shape).astype(dtype)


@pytest.mark.parametrize("reduce", [None, "sum"])
def test_cuda_kernel_without_a_c_type_runs_through_xp(reduce: str | None) -> None:
    # float16 has no CUDA C type here: the plan must still run (one xp call per step). The
    # runner takes any array module, so numpy stands in for cupy.
    expr = ("call", "multiply", ("var", "a0"), ("call", "tanh", ("var", "a0")))
    x = np.linspace(-2, 2, 9).astype(np.float16)
    run = cuda_kernel(expr, ("a0",), ("float16",), reduce=reduce, keepdims=True)
    want = x * np.tanh(x)
    want = want.sum(keepdims=True) if reduce else want
    got = run(np, x)
    assert got.dtype == np.float16 and np.array_equal(got, want)
    out = np.empty_like(want)
    assert run(np, x, out=out) is out and np.array_equal(out, want)
