"""remainder, fmod and floor_divide exported to ONNX (``Mod``; floor division as ``Floor(a / b)``
for floats, ``(a - remainder) / b`` for integers), alone and inside fused nodes, run by ONNX
Runtime against eager on mixed signs."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import ops

ort = pytest.importorskip("onnxruntime", reason="ONNX Runtime is optional (pip install .[onnx])")
pytest.importorskip("onnx", reason="the onnx package is optional (pip install .[onnx])")


def _program(x, y):
    return ops.remainder(x * 2, y) + ops.fmod(x, y) * 3 - ops.floor_divide(x, y)


def _inputs(dtype: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    if dtype.startswith("int"):  # no zero divisors: ONNX Runtime's integer Mod would trap
        b = rng.choice([-5, -3, -1, 1, 2, 7], n).astype(dtype)
        return rng.integers(-40, 40, n).astype(dtype), b
    b = rng.uniform(0.5, 2.0, n) * rng.choice([-1.0, 1.0], n)
    return rng.uniform(-9, 9, n).astype(dtype), b.astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "int32", "int64"])
@pytest.mark.parametrize("n", [16, 200_000])  # 200k elements: the fuse pass makes one node
def test_exported_program_matches_eager(dtype: str, n: int) -> None:
    x, y = _inputs(dtype, n)
    compiled = dualflow.compile(_program)
    with dualflow.no_grad():
        compiled(dualflow.tensor(x), dualflow.tensor(y))
    trace = compiled.history[-1]
    assert any(node.op == "fused" for node in trace.graph.nodes) == (n > 16)
    proto = dualflow.onnx.export_graph(trace.graph, [r.read() for r in trace.checks.refs])
    session = ort.InferenceSession(proto.SerializeToString())
    names = [i.name for i in session.get_inputs()]
    (got,) = session.run(None, dict(zip(names, (x, y))))
    want = _program(dualflow.tensor(x), dualflow.tensor(y)).numpy()
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
