"""The memory plan of compiled functions: ``dualflow.explain`` prints it, and a warm plan call of
a forward-only MLP allocates what the plan predicts (tracemalloc).

What the prediction covers (as in ``tests/runtime/test_memory.py``): ``predicted_peak`` is the
pooled ``out=`` buffers (allocated at the first run and kept by the plan) plus ``dynamic_peak``,
the most bytes of unplanned intermediates and outputs alive at once. A warm call finds the pool
allocated, so its measured peak above what was live before is ``dynamic_peak``, and the bytes it
needs in all (pool included) are ``predicted_peak``. Inputs, captured state and consts are never
counted.
"""

from __future__ import annotations

import numpy as np

import dualflow
from dualflow import ops
from dualflow.bench.harness import peak_memory


def _mlp(layers: int = 8, batch: int = 128, width: int = 256) -> tuple:
    rng = np.random.default_rng(0)
    params = [
        (
            dualflow.tensor(rng.normal(size=(width, width)).astype(np.float32) / width**0.5),
            dualflow.tensor(rng.normal(size=width).astype(np.float32)),
        )
        for _ in range(layers)
    ]

    @dualflow.compile
    def forward(x: dualflow.Tensor) -> dualflow.Tensor:
        h = x
        for w, b in params:
            h = ops.relu(ops.linear(h, w, b))
        return h

    return forward, dualflow.tensor(rng.normal(size=(batch, width)).astype(np.float32))


def test_explain_prints_the_memory_table_and_predicted_peak() -> None:
    forward, x = _mlp(layers=2)
    with dualflow.no_grad():
        text = str(dualflow.explain(forward, x))
    plan = forward.history[0].plan
    assert "value buffer      bytes first  last  how     shared" in text
    assert f"predicted peak: {plan.predicted_peak} B" in text
    assert plan.memory_table() in text.replace("\n    ", "\n")


def test_warm_plan_call_of_a_forward_mlp_allocates_what_the_plan_predicts() -> None:
    forward, x = _mlp()
    with dualflow.no_grad():
        want = forward(x).numpy()
        forward(x)  # warm: the plan's pool is allocated
        (trace,) = forward.history
    plan, memory = trace.plan, trace.plan.memory
    state = [ref.read() for ref in trace.checks.refs]
    act = 128 * 256 * 4
    # matmul outputs and the fused bias+relu ping-pong between two pooled buffers (in place);
    # only the returned last activation is allocated per call
    assert memory.buffer_bytes == 2 * act and memory.dynamic_peak == act
    assert memory.predicted_peak == memory.buffer_bytes + memory.dynamic_peak
    inputs, result = [x.numpy()], []
    warm = peak_memory(lambda: result.append(plan.run(inputs, state)))
    assert abs(warm - memory.dynamic_peak) <= 0.1 * memory.dynamic_peak, (warm, memory.table())
    held = warm + memory.buffer_bytes
    assert abs(held - plan.predicted_peak) <= 0.1 * plan.predicted_peak
    np.testing.assert_array_equal(np.asarray(result[0].outputs[0]), want)
