"""Flat kernels at the CPU's widest vectors (kernels/base/wide_vectors.py): the attribute reaches
the function's IR, the flat kernels carry it, and it never changes a result's bits."""

from __future__ import annotations

from collections import OrderedDict

import llvmlite.binding as llvm
import numba
import numpy as np
import pytest

from dualflow.graph_ir import Graph, GraphBuilder
from dualflow.kernels.base import wide_vectors
from dualflow.kernels.numba import numba_elementwise
from tests.kernels.fused_programs import Fused, arith_chain, fused_nodes, op_graph, tanh_chain

AVX512 = bool(llvm.get_host_cpu_features().get("avx512f", False))
# the transcendental ops and the ones with selects, divisions and integer paths
SAMPLED_OPS = ("tanh", "sigmoid", "exp", "divide", "power", "sqrt", "where", "clip", "maximum")


@numba.njit
def _marked(a):
    wide_vectors.wide_vectors()
    for i in range(a.size):
        a[i] = a[i] * np.float32(0.5) + np.float32(1.0)


@numba.njit
def _unmarked(a):
    for i in range(a.size):
        a[i] = a[i] * np.float32(0.5) + np.float32(1.0)


@pytest.fixture(autouse=True)
def _own_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel modules these tests load stay theirs: a later test loading the same source
    (test_fused_kernels checks that its kernel reaches its own store) finds none in memory."""
    monkeypatch.setattr(numba_elementwise, "_MODULES", OrderedDict())


def sgd_update(shape: tuple[int, ...]) -> Graph:
    """``p - 0.01 * g``: one multiply and one subtract an element, bound by memory."""
    b = GraphBuilder("sgd")
    p, g = b.input(shape, "float32", "p"), b.input(shape, "float32", "g")
    (step,) = b.node("multiply", [g, 0.01])
    b.output(*b.node("subtract", [p, step]))
    return b.build()


def test_the_attribute_reaches_only_the_marked_functions_ir() -> None:
    a = np.ones(100, np.float32)
    _marked(a)
    _unmarked(a)
    marked = _marked.inspect_llvm(_marked.signatures[0])
    assert wide_vectors.ATTRIBUTE in marked
    assert wide_vectors.ATTRIBUTE not in _unmarked.inspect_llvm(_unmarked.signatures[0])


def _sources(fused: Fused, wide: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[str, tuple]:
    """The flat kernel's source with its loop at the widest vectors or not (whatever its work)."""
    flat = tuple(int(np.prod(s)) > 1 for s in fused.shapes)
    with monkeypatch.context() as patch:
        patch.setattr(numba_elementwise, "compute_bound", lambda program: wide)
        return numba_elementwise.render_source(fused.program(), flat)


def test_compute_bound_flat_kernels_call_it_first() -> None:
    (fused,) = fused_nodes(tanh_chain((64,)))  # two tanh: compute-bound on any machine
    source, _ = numba_elementwise.render_source(fused.program(), (True,))
    assert wide_vectors.IMPORT in source
    assert source.index("wide_vectors()") < source.index("for i in range")


def test_memory_bound_flat_kernels_keep_llvms_width() -> None:
    (fused,) = fused_nodes(sgd_update((64,)))
    source, _ = numba_elementwise.render_source(fused.program(), (True, True))
    assert "wide_vectors" not in source


@pytest.mark.skipif(not AVX512, reason="512-bit vectors need AVX-512")
def test_a_flat_kernels_loop_runs_on_512_bit_registers(monkeypatch: pytest.MonkeyPatch) -> None:
    (fused,) = fused_nodes(arith_chain((64,), "float32", None))
    x = np.linspace(-3, 3, 4096, dtype=np.float32)
    asm = {}
    for wide in (True, False):
        source, consts = _sources(fused, wide, monkeypatch)
        # a fresh dispatcher: machine code loaded from the kernels store has no assembly to read
        module = numba_elementwise.load_module(source)
        kernel = numba.njit(error_model="numpy")(module.kernel.py_func)
        kernel(np.empty_like(x), x, *consts)
        asm[wide] = kernel.inspect_asm(kernel.signatures[0])
    # unmarked, LLVM keeps its own choice for this CPU: 256-bit on the Xeons, 512 on a Zen 4
    # (znver4 has no preference for 256-bit vectors), as for a plain numba function
    a = np.ones(100, np.float32)
    _unmarked(a)
    default_512 = "zmm" in _unmarked.inspect_asm(_unmarked.signatures[0])
    assert "zmm" in asm[True] and ("zmm" in asm[False]) == default_512


def _values(dtype: str, count: int, rng: np.random.Generator) -> np.ndarray:
    """Normal values, large ones and the specials (signed zeros, infinities, NaN)."""
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 1e-40], dtype)
    values = (rng.standard_normal(count) * rng.choice([0.1, 1.0, 30.0], count)).astype(dtype)
    some = min(count, len(specials))
    values[rng.choice(count, some, replace=False)] = specials[:some]
    return values


def _same_bits_both_ways(fused: Fused, monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    rng = np.random.default_rng(size)
    inputs = [
        _values(d, size if int(np.prod(s)) > 1 else 1, rng)
        for d, s in zip(fused.dtypes, fused.shapes)
    ]
    results = []
    for wide in (True, False):
        source, consts = _sources(fused, wide, monkeypatch)
        out = np.empty(size, fused.program().dtype)
        numba_elementwise.load_module(source).kernel(out, *inputs, *consts)
        results.append(out)
    wide_out, narrow = results
    assert wide_out.tobytes() == narrow.tobytes()


@pytest.mark.parametrize("size", [1, 63, 1000, 4099])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_chains_bits_are_the_narrow_loops(
    size: int, dtype: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    graphs = [arith_chain((8,), dtype, (8,))]
    graphs += [tanh_chain((8,), dtype=dtype)] if dtype == "float32" else []  # float32's tanh only
    for graph in graphs:
        for fused in fused_nodes(graph):
            _same_bits_both_ways(fused, monkeypatch, size)


@pytest.mark.parametrize("name", SAMPLED_OPS)
def test_sampled_ops_bits_are_the_narrow_loops(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for fused in fused_nodes(op_graph(name, "float32")):
        _same_bits_both_ways(fused, monkeypatch, 1037)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_elementwise_ops_bits_are_the_narrow_loops(
    dtype: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.kernels.fused_programs import elementwise_ops

    for name in elementwise_ops():
        for fused in fused_nodes(op_graph(name, dtype)):
            try:
                _same_bits_both_ways(fused, monkeypatch, 1037)
            except NotImplementedError:  # no numba rendering: such ops run by numpy's loops
                continue
