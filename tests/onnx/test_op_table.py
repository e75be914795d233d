"""Every op of the op table with a converter, exported alone and run by ONNX Runtime vs eager."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow.onnx.converters import CONVERTERS
from dualflow.ops.registry import OPS
from tests.opinfo import OP_INFOS

ort = pytest.importorskip("onnxruntime", reason="ONNX Runtime is optional (pip install .[onnx])")
pytest.importorskip("onnx", reason="the onnx package is optional (pip install .[onnx])")

# Registered ops with no converter, each for a reason (docs/interop.md lists them too).
NOT_EXPORTED = {
    "allreduce": "collective",
    "allreduce_start": "collective",
    "allreduce_wait": "collective",
    "allreduce_progress": "collective",
    "assign": "writes state: a forward to export is pure",
    "adam_update": "an optimizer's step: a forward to export has none",
    "batch_norm": "training-mode BatchNorm: export in eval mode",
    "dropout_mask": "training-mode dropout: export in eval mode",
    "random_normal": "sampling: ONNX's RandomNormal cannot reproduce dualflow's stream",
    "random_uniform": "sampling: ONNX's RandomUniform cannot reproduce dualflow's stream",
    "debug_print": "a host side effect",
    "guard": "control flow on a traced value",
    "cumprod": "no ONNX operator: a running product would be a Loop",
    "cummax": "no ONNX operator: a running maximum and its indices would be a Loop",
    "cummin": "no ONNX operator: a running minimum and its indices would be a Loop",
    "logcumsumexp": "no ONNX operator: a stable running logsumexp would be a Loop",
}
BACKWARD = {name for name in OPS if name.endswith("_grad")} | {"sum_to", "max_pool2d_gather"}
BACKWARD |= {"conv2d_grad_weight", "embedding_grad", "sum_slice_grads"}  # backward graphs only


def test_every_registered_op_is_converted_or_listed():
    missing = set(OPS) - set(CONVERTERS) - set(NOT_EXPORTED) - BACKWARD
    assert not missing, f"ops without a converter or a reason: {sorted(missing)}"
    assert not set(NOT_EXPORTED) & set(CONVERTERS)


CASES = [
    pytest.param(info, i, id=f"{info.name}-{i}")
    for info in OP_INFOS
    if info.covers() and set(info.covers()) <= set(CONVERTERS)
    for i in range(3)
]


@pytest.mark.parametrize(("info", "index"), CASES)
def test_op_matches_eager(info, index, tmp_path):
    samples = info.samples(np.random.default_rng(index))
    if index >= len(samples):
        pytest.skip("fewer samples")
    sample = samples[index]
    arrays = [
        (x.astype(np.float32) if x.dtype.kind == "f" else x) if isinstance(x, np.ndarray) else x
        for x in sample.inputs
    ]
    positions = [i for i, x in enumerate(arrays) if isinstance(x, np.ndarray)]

    def fn(*tensors):
        args = list(arrays)
        for i, t in zip(positions, tensors, strict=True):
            args[i] = t
        return info.fn(*args, **sample.kwargs)

    tensors = [dualflow.tensor(arrays[i]) for i in positions]
    want = fn(*tensors)
    if not isinstance(want, dualflow.Tensor):
        pytest.skip("not a single-tensor result")
    names = [f"in{i}" for i in positions]
    model = dualflow.onnx.export(fn, tensors, tmp_path / "op.onnx", input_names=names)
    session = ort.InferenceSession(model.SerializeToString())
    (got,) = session.run(None, {n: arrays[i] for n, i in zip(names, positions, strict=True)})
    expected = want.numpy()
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
