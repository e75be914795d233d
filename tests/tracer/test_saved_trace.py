"""A traced training step saved with ``graph_ir.save`` runs in a fresh process from the files
alone (graph_ir + runtime, no tensor/autograd/tracer) and gives the in-process plan's results.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

import dualflow
from dualflow import graph_ir, ops, optim
from dualflow.nn import Parameter
from tests.tracer.helpers import assert_same, current_trace

ROOT = str(Path(__file__).resolve().parents[2])
SCRIPT = """
import sys, types
pkg = types.ModuleType("dualflow"); pkg.__path__ = [{root!r} + "/dualflow"]
sys.modules["dualflow"] = pkg  # the layers alone, without dualflow/__init__.py
import numpy as np
from dualflow.graph_ir import load
from dualflow.runtime import lower
graph, state = load(sys.argv[1])
with np.load(sys.argv[2]) as data:
    inputs = [data[f"arr_{{i}}"] for i in range(len(data.files))]
result = lower(graph).run(inputs, state)
assert result.failed_guard is None
np.savez(sys.argv[3], *result.outputs, *result.updates)
for name in ("dualflow.tensor.core", "dualflow.autograd", "dualflow.tracer"):
    assert name not in sys.modules, name
"""


def _step() -> tuple[Any, tuple]:
    rng = np.random.default_rng(0)
    params = [Parameter(rng.normal(size=s) * 0.5) for s in ((5, 4), (5,), (3, 5), (3,))]
    opt = optim.SGD(params, lr=0.1)
    w1, b1, w2, b2 = params

    def step(x: Any, t: Any) -> Any:
        opt.zero_grad()
        h = ops.dropout(ops.relu(ops.linear(x, w1, b1)), 0.2)
        loss = ops.softmax_cross_entropy(ops.linear(h, w2, b2), t)
        if loss > 0.0:
            loss.backward()
            opt.step()
        return loss.detach()

    batch = (dualflow.tensor(rng.normal(size=(6, 4))), dualflow.tensor(rng.integers(0, 3, 6)))
    return step, batch


def test_saved_training_step_runs_in_a_fresh_process(tmp_path: Path) -> None:
    step, batch = _step()
    compiled = dualflow.compile(step, fallback="error")
    compiled(*batch)
    compiled(*batch)  # the first trace is single-use if the default generator was born in it
    trace, inputs = current_trace(compiled, batch)
    state = [np.array(ref.read(), copy=True) for ref in trace.checks.refs]
    graph_ir.save(trace.graph, str(tmp_path / "step"), state)
    np.savez(tmp_path / "inputs.npz", *inputs)
    expected = trace.plan.run(inputs, state)
    assert expected.failed_guard is None and len(trace.graph.updates) >= 5  # params + RNG
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            SCRIPT.format(root=ROOT),
            str(tmp_path / "step"),
            str(tmp_path / "inputs.npz"),
            str(tmp_path / "out.npz"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert out.returncode == 0, out.stderr
    with np.load(tmp_path / "out.npz") as data:
        got = [data[f"arr_{i}"] for i in range(len(data.files))]
    assert_same(got, [*expected.outputs, *expected.updates])
    # and the same numbers as the compiled call itself (which commits them)
    loss = compiled(*batch)
    assert_same(loss, expected.outputs[0])
