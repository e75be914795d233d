"""A data-parallel training step under ``dualflow.compile`` on loopback ranks (one thread and one
compiled function per rank): the same parameters as eager, with ``allreduce`` nodes in the graph.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow.distributed import run_loopback
from tests.distributed.helpers import batches, data_parallel

PER_RANK = 3


@pytest.mark.parametrize("kwargs", [{}, {"bucket_mb": 100 / 2**20}, {"grad_dtype": "float16"}])
def test_compiled_step_equals_eager(kwargs: dict) -> None:
    data = batches(4, PER_RANK, 2)
    eager = run_loopback(lambda c: data_parallel(c, data, PER_RANK, **kwargs)[0], 2)
    compiled = run_loopback(lambda c: data_parallel(c, data, PER_RANK, compile=True, **kwargs), 2)
    for (params, fn), want in zip(compiled, eager):
        assert fn.stats().traces == 1 and fn.stats().plan_runs == 3
        for got, ref in zip(params, want):
            np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-7)
    for a, b in zip(compiled[0][0], compiled[1][0]):
        np.testing.assert_array_equal(a, b)


def test_the_graph_has_one_allreduce_per_bucket() -> None:
    data = batches(2, PER_RANK, 2)
    # Gradients of 128, 32, 96 and 12 bytes with a 128-byte cap: three buckets.
    results = run_loopback(
        lambda c: data_parallel(c, data, PER_RANK, compile=True, bucket_mb=128 / 2**20), 2
    )
    for _, fn in results:
        graph = fn.history[-1].graph
        # O2's bucket_allreduce splits each into a start (holding the attrs) and a wait.
        nodes = [n for n in graph.nodes if n.op in ("allreduce", "allreduce_start")]
        assert len(nodes) == 3
        assert {n.attrs["reduction"] for n in nodes} == {"mean"}
        assert "allreduce" in dualflow.graph_ir.print_graph(graph)


@pytest.mark.filterwarnings("ignore:dualflow.compile:RuntimeWarning")  # checked via the reason
def test_a_python_decision_after_an_allreduce_fails_closed() -> None:
    # A guard checked after an all-reduce could fail on one rank only, which would then redo the
    # all-reduce eagerly alone: tracing refuses, naming both lines, and every rank runs eagerly.
    from dualflow import ops
    from dualflow.errors import TracingError

    def body(comm):
        def step(x):
            total = ops.allreduce(x, comm)
            return total * 2 if float(total.sum()) > 0 else total  # a guard after the all-reduce

        strict = dualflow.compile(step, fallback="error")
        x = dualflow.tensor([1.0, float(comm.rank)])
        with pytest.raises(TracingError, match=r"(?s)float\(\) of a tensor after the all-reduce"):
            strict(x)
        relaxed = dualflow.compile(step)  # the default: warn (once) and run eagerly from now on
        first = relaxed(x).tolist()
        return first, relaxed(x).tolist(), relaxed.stats().traces, relaxed._eager_reason

    for first, second, traces, reason in run_loopback(body, 2):
        assert first == second == [4.0, 2.0] and traces == 0
        assert "deadlock" in reason and "test_compiled.py:" in reason
