"""Shared checks for compiled functions: every trace's graph verifies, round-trips through the
text format, and the reference interpreter agrees with the plan on the call's own inputs; and a
seeded training step to compile.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

import dualflow
from dualflow import graph_ir
from dualflow._config import config
from dualflow.tracer import pytree
from dualflow.tracer.signature import flatten


def arrays_of(value: Any) -> list[np.ndarray]:
    """Every tensor/array leaf of a (nested) result, as numpy arrays, in order (dicts in
    insertion order, as ``pytree`` walks them); None leaves are left out."""
    leaves = pytree.flatten(value, opaque=True)[0]
    return [
        np.asarray(v.raw_array if isinstance(v, dualflow.Tensor) else v)
        for v in leaves
        if v is not None
    ]


def _containers(value: Any) -> Any:
    """The containers of a result, with leaves blanked (a tensor and an array are both leaves)."""
    return pytree.flatten(value, opaque=True)[2]


def assert_same(got: Any, want: Any, rtol: float = 0.0, atol: float = 0.0, msg: str = "") -> None:
    """Same containers (types, keys in order) and leaf-by-leaf equality (shapes, dtypes and
    values; NaNs compare equal)."""
    assert _containers(got) == _containers(want), f"{msg}: structure {got!r} vs {want!r}"
    got_leaves, want_leaves = arrays_of(got), arrays_of(want)
    assert len(got_leaves) == len(want_leaves), f"{msg}: {len(got_leaves)} vs {len(want_leaves)}"
    for i, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        assert g.shape == w.shape, f"{msg}[{i}]: shape {g.shape} != {w.shape}"
        assert g.dtype == w.dtype, f"{msg}[{i}]: dtype {g.dtype} != {w.dtype}"
        if rtol == 0 and atol == 0:
            np.testing.assert_array_equal(g, w, err_msg=f"{msg}[{i}]")
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{msg}[{i}]")


def tol(dtype: Any) -> dict[str, float]:
    """The tolerance of compiled vs eager: float64 to 1e-12, float32 to 1e-6."""
    if np.dtype(dtype) == np.float64:
        return {"rtol": 1e-12, "atol": 1e-12}
    return {"rtol": 1e-6, "atol": 1e-6}


def check_graph(graph: graph_ir.Graph) -> None:
    """``verify`` passes and print -> parse -> print is the identity."""
    graph_ir.verify(graph)
    text = graph_ir.print_graph(graph)
    consts = {v.id: a for v, a in graph.consts.items()}
    assert graph_ir.print_graph(graph_ir.parse_graph(text, consts)) == text


def current_trace(fn: Any, args: tuple, kwargs: dict | None = None) -> tuple[Any, list[Any]]:
    """The trace a compiled ``fn`` would run for ``args`` now, and its input arrays."""
    kwargs = kwargs or {}
    names = list(inspect.signature(fn.fn).parameters)
    flat = flatten(args, kwargs, names)
    inputs = [leaf.raw_array if isinstance(leaf, dualflow.Tensor) else leaf for leaf in flat.leaves]
    for trace in fn.traces.get((flat.key, config.snapshot(), flat.aliases), ()):
        if trace.checks.mismatch(flat.leaves) is None:
            return trace, inputs
    raise AssertionError("no reusable trace for these arguments")


def check_interpret_matches_plan(
    fn: Any, args: tuple, kwargs: dict | None = None, rtol: float = 0.0, atol: float = 0.0
) -> None:
    """The reference interpreter and the plan agree on the current trace for ``args`` (exactly,
    unless a fused sum, which adds floats in float64 where the interpreter runs numpy's sum,
    asks for a tolerance)."""
    trace, inputs = current_trace(fn, args, kwargs)
    graph = trace.graph
    state = [ref.read() for ref in trace.checks.refs]
    before = [np.array(s, copy=True) for s in state]
    expected = graph_ir.interpret(graph, inputs, state)
    for s, b in zip(state, before):  # the interpreter never writes its inputs
        np.testing.assert_array_equal(s, b)
    scratch = [np.array(s, copy=True) for s in state]  # the plan may write donated updates
    result = trace.plan.run(inputs, scratch)
    for k, (s, b) in enumerate(zip(scratch, before)):
        if k not in trace.plan.donated_slots or result.failed_guard is not None:
            np.testing.assert_array_equal(s, b)
    if expected.failed_guards:
        assert result.failed_guard is expected.failed_guards[0]
        return
    assert result.failed_guard is None
    tols = {"rtol": rtol, "atol": atol}
    assert_same(
        list(result.outputs), list(expected.outputs), msg="plan vs interpret outputs", **tols
    )
    new_state = [expected.state[graph.state.index(target)] for target, _ in graph.updates]
    assert_same(list(result.updates), new_state, msg="plan vs interpret updates", **tols)


def check_all_traces(fn: Any) -> None:
    """Every trace recorded by ``fn`` verifies and round-trips."""
    assert fn.history, "the function was never traced"
    for trace in fn.history:
        check_graph(trace.graph)


def seeded_training_step(seed: int, layers: list, optimizer: Any, x_shape: tuple) -> tuple:
    """``(model, step)``: ``nn.Sequential(*layers())`` built after ``manual_seed(seed)``, and a
    step of ``optimizer(params)`` on the mean square of its output for a seeded input; two
    calls with one seed start identical (one compiled, one eager)."""
    dualflow.manual_seed(seed)
    model = dualflow.nn.Sequential(*layers())
    opt = optimizer(model.parameters())
    x = dualflow.tensor(np.random.default_rng(seed).normal(size=x_shape).astype(np.float32))

    def step() -> Any:
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    return model, step
