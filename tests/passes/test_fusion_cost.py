"""fuse decides with the cost model of the device's backend (``Backend.fusion``), not the CPU's
numbers whatever the device: the numpy backend's model is the CPU's measured one, a backend
giving another model changes the decisions, and ``run_passes`` hands the plan's device to the
passes that take one."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dualflow.graph_ir import Graph, GraphBuilder, interpret
from dualflow.kernels.backend import CPU_FUSION, PLAIN_FUSION, FusionCost, backend_of
from dualflow.kernels.backend import register_backend as register
from dualflow.passes import manager
from dualflow.passes.fuse import MIN_FUSE_SIZE, cost_model, fuse
from dualflow.passes.fuse_exact import fuse_exact
from dualflow.runtime import lower


def _chain(shape: tuple[int, ...], fn: str = "tanh") -> Graph:
    """``fn(x * 0.5 + 1)``: three ufunc calls."""
    b = GraphBuilder("chain")
    x = b.input(shape, "float32", "x")
    (h,) = b.node("multiply", [x, 0.5])
    (h,) = b.node("add", [h, 1.0])
    b.output(*b.node(fn, [h]))
    return b.build()


def _ops(graph: Graph) -> list[str]:
    return [n.op for n in graph.nodes]


@pytest.fixture
def numpy_fusion():
    """Give the numpy backend another cost model for one test (restored after it)."""
    before = backend_of(np)

    def use(cost: FusionCost) -> None:
        register(np, dataclasses.replace(before, fusion=cost))

    yield use
    register(np, before)


def test_the_cpu_model_is_the_numpy_backends_and_plain_modules_never_loop() -> None:
    assert cost_model("cpu") is backend_of(np).fusion is CPU_FUSION
    assert MIN_FUSE_SIZE == CPU_FUSION.min_size == 4096
    assert (
        PLAIN_FUSION.one_loop(("call", "add", ("var", "a0"), ("const", 1)), ("a0",), ("float32",))
        is False
    )
    # below min_size a region fuses only as one numba loop: float32 tanh is, sin is not
    assert _ops(fuse(_chain((16,)))) == ["fused"]
    assert _ops(fuse(_chain((16,), "sin"))) == ["multiply", "add", "sin"]


def test_decisions_follow_the_backends_model(numpy_fusion) -> None:
    small = _chain((16,), "sin")
    numpy_fusion(FusionCost(one_loop=lambda expr, args, dtypes: True))  # every region one loop
    assert _ops(fuse(small)) == ["fused"]
    assert _ops(fuse_exact(small)) == ["fused"]
    numpy_fusion(FusionCost(min_size=1 << 30, single_size=1 << 30, min_ops=99))  # never pays
    assert _ops(fuse(_chain((128, 128)))) == ["multiply", "add", "tanh"]
    assert _ops(fuse(_chain((128, 128)), min_size=0)) == ["fused"]  # given: it rules


def test_run_passes_gives_the_device_to_passes_that_take_one(monkeypatch) -> None:
    seen: list = []

    def probe(graph: Graph, device: str = "none") -> Graph:
        seen.append(device)
        return graph

    monkeypatch.setitem(manager.PASSES, "probe", probe)
    graph = _chain((4,))
    manager.run_passes(graph, ("probe", "dce"))
    manager.run_passes(graph, ("probe",), device="cpu:0")
    assert seen == ["cpu", "cpu:0"]


def _bias_corrected(size: int) -> tuple[Graph, list[np.ndarray]]:
    """``x - (0.01 / (1 - beta ** t)) * m``: an Adam-like update whose only pow is on scalars."""
    b = GraphBuilder("update")
    x, m = b.input((size,), "float32", "x"), b.input((size,), "float32", "m")
    beta, t = b.input((), "float64", "beta"), b.input((), "float64", "t")
    (p,) = b.node("power", [beta, t])
    (c,) = b.node("subtract", [1.0, p])
    (s,) = b.node("divide", [0.01, c])
    (s,) = b.node("cast", [s], {"dtype": "float32"})
    (u,) = b.node("multiply", [s, m])
    b.output(*b.node("subtract", [x, u]))
    rng = np.random.default_rng(0)
    arrays = [rng.random(size, dtype=np.float32), rng.random(size, dtype=np.float32)]
    return b.build(), [*arrays, np.float64(0.9), np.float64(7.0)]


@pytest.mark.parametrize("size", [1 << 13, 1 << 16])
def test_steps_on_scalars_stay_out_of_a_region_they_would_keep_off_one_loop(size) -> None:
    # libm's pow (numba) and numpy's differ in the last bit, so a region holding beta ** t ran
    # on the blocked evaluator; without its scalar steps the rest is one numba loop
    graph, inputs = _bias_corrected(size)
    fused = fuse(graph)
    assert _ops(fused) == ["power", "subtract", "divide", "cast", "fused"]
    node = fused.nodes[-1]
    dtypes = tuple(v.dtype for v in node.inputs)
    assert CPU_FUSION.one_loop(node.attrs["expr"], node.attrs["args"], dtypes)
    want, got = interpret(graph, inputs).outputs[0], interpret(fused, inputs).outputs[0]
    assert np.asarray(got).tobytes() == np.asarray(want).tobytes()
    plan = lower(fused)
    assert plan.run(inputs, []).outputs[0].tobytes() == np.asarray(want).tobytes()


def test_a_region_blocked_by_a_full_size_step_keeps_its_scalars() -> None:
    # sin over the whole array keeps the region off numba anyway: nothing to gain by splitting
    b = GraphBuilder("sin")
    x, beta = b.input((1 << 16,), "float64", "x"), b.input((), "float64", "beta")
    (p,) = b.node("power", [beta, 3.0])
    (h,) = b.node("sin", [x])
    b.output(*b.node("multiply", [h, p]))
    assert _ops(fuse(b.build())) == ["fused"]
