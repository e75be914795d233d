"""Aliasing per call (``runtime/aliasing``): ``sum_to``'s rule (a sum is new memory, the
identity is its input) in the memory plan, and compiled steps returning both kinds."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import ops
from dualflow.graph_ir import Graph, GraphBuilder, interpret, verify
from dualflow.graph_ir.ir import Value
from dualflow.runtime import lower
from dualflow.runtime import memory as memory_module
from dualflow.runtime.aliasing import alias_roots
from dualflow.runtime.memory import plan_memory
from dualflow.tensor.core import Tensor
from tests.tracer.helpers import assert_same, check_all_traces


def _bias_gradient(shape: tuple[int, ...], rows: int = 6) -> tuple[Graph, Value, Value]:
    """A gradient ``g`` (``h * gy``) summed by ``sum_to`` into ``shape`` (a bias gradient when
    it is smaller than g), returned: (graph, g, the sum)."""
    b = GraphBuilder("bias_grad")
    h, gy = b.input((rows, 5), "float32", "h"), b.input((rows, 5), "float32", "gy")
    (g,) = b.node("multiply", [h, gy])
    (summed,) = b.node("sum_to", [g], {"shape": shape})
    b.output(summed)
    return verify(b.build()), g, summed


@pytest.mark.parametrize("shape", [(5,), (1, 5), (6, 1)])
def test_a_sum_to_that_sums_returns_new_memory_so_its_input_is_pooled(shape) -> None:
    # sum_to's aliasing rule: a reduction's result is its own array, so the value it sums
    # (every bias gradient's producer) takes a pooled buffer, not the output's per-run one
    graph, g, summed = _bias_gradient(shape)
    assert alias_roots(graph)[summed] == {summed}
    memory = plan_memory(graph)
    assert g not in memory.fresh and [r.how for r in memory.rows if r.value == g.id] == ["new"]
    rng = np.random.default_rng(0)
    inputs = [rng.normal(size=(6, 5)).astype(np.float32) for _ in range(2)]
    result = lower(graph).run(inputs, [])
    assert_same(list(result.outputs), list(interpret(graph, inputs).outputs))
    assert not np.shares_memory(result.outputs[0], lower(graph).run(inputs, []).outputs[0])


@pytest.mark.parametrize("rows", [6, 4096])  # a small output, and one with a per-run buffer
def test_a_sum_to_of_the_same_shape_is_its_input_so_that_input_is_the_output(rows) -> None:
    graph, g, summed = _bias_gradient((rows, 5), rows)  # nothing to sum: sum_to returns g
    assert alias_roots(graph)[summed] == {g}
    memory = plan_memory(graph)  # g is the output: never a pooled buffer a later run reuses
    assert all(r.how in ("output", "lent") for r in memory.rows if r.value == g.id)
    assert (g in memory.fresh) == (g.nbytes >= memory_module.FRESH_MIN_BYTES)
    rng = np.random.default_rng(1)
    inputs = [rng.normal(size=(rows, 5)).astype(np.float32) for _ in range(2)]
    plan = lower(graph)
    first = plan.run(inputs, []).outputs[0]
    kept = first.copy()
    plan.run([-x for x in inputs], [])  # a later run never writes over a returned output
    assert_same([first], [kept])


def test_sum_to_results_of_both_kinds_stay_as_returned_across_calls() -> None:
    # sum_to's aliasing rule (the memory plan): a reduction is new memory, so the product it
    # sums takes a pooled buffer; the identity returns that product itself, which therefore
    # owns a per-run buffer (512 x 64 float32: above the per-run size) a later call never
    # writes over. Both kinds returned, compiled at O0 and by default, equal eager's.
    def step(x: Tensor, w: Tensor) -> tuple:
        g = x * w
        h = ops.relu(x) * w
        return ops.sum_to(g, (1, 64)), ops.sum_to(g, g.shape), ops.sum_to(h, (64,))

    rng = np.random.default_rng(0)
    calls = [[dualflow.tensor(rng.normal(size=s).astype(np.float32)) for s in ((512, 64), (64,))]]
    calls.append(
        [dualflow.tensor(rng.normal(size=s).astype(np.float32)) for s in ((512, 64), (64,))]
    )
    for passes in ("O0", None):
        compiled = dualflow.compile(step, passes=passes) if passes else dualflow.compile(step)
        firsts = [compiled(*args) for args in calls]  # the second call after the first's result
        kept = [tuple(t.numpy().copy() for t in first) for first in firsts]
        compiled(*calls[0])  # a third call: the first two results stay as they were returned
        rows = compiled.history[-1].plan.memory.rows  # g the output's, h's products pooled
        assert rows[0].how == "output" and "new" in [r.how for r in rows[1:]]
        for args, first, copy in zip(calls, firsts, kept):
            assert_same(first, step(*args))
            assert_same(tuple(t.numpy() for t in first), copy)
        check_all_traces(compiled)
