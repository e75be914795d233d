"""Layer norm's ONNX form: ``LayerNormalization`` for float32, written out for other dtypes
(ONNX keeps that op's statistics in float32): every output of the op, in its own dtype, as ONNX
Runtime computes it against eager."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow.ops import OPS
from dualflow.ops.dispatch import apply

ort = pytest.importorskip("onnxruntime", reason="ONNX Runtime is optional (pip install .[onnx])")
pytest.importorskip("onnx", reason="the onnx package is optional (pip install .[onnx])")

TOL = {"float32": 1e-5, "float64": 1e-12, "float16": 2e-3}


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("k", [1, 2])
def test_every_output_matches_eager_in_its_dtype(dtype: str, k: int, tmp_path) -> None:
    rng = np.random.default_rng(k)
    x = (rng.standard_normal((3, 4, 6)) * 2 + 1).astype(dtype)
    gamma = rng.uniform(0.5, 1.5, x.shape[3 - k :]).astype(dtype)
    beta = rng.standard_normal(x.shape[3 - k :]).astype(dtype)

    def fn(x, gamma, beta):
        return apply(OPS["layer_norm"], x, gamma, beta, eps=1e-5)  # y, mean, rstd

    tensors = [dualflow.tensor(a) for a in (x, gamma, beta)]
    want = [t.numpy() for t in fn(*tensors)]
    names = ["x", "gamma", "beta"]
    model = dualflow.onnx.export(fn, tensors, tmp_path / "ln.onnx", input_names=names)
    types = {n.op_type for n in model.graph.node}
    assert ("LayerNormalization" in types) == (dtype == "float32")
    session = ort.InferenceSession(model.SerializeToString())
    got = session.run(None, dict(zip(names, (x, gamma, beta), strict=True)))
    assert len(got) == 3
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=TOL[dtype], atol=TOL[dtype])
