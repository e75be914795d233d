"""Advanced (integer-array) indexing exported with numpy's placement of the gathered axes."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow

ort = pytest.importorskip("onnxruntime", reason="ONNX Runtime is optional (pip install .[onnx])")
pytest.importorskip("onnx", reason="the onnx package is optional (pip install .[onnx])")

I = np.array([[0, -1], [2, 1]])  # noqa: E741 - an index, as in numpy's docs
J = np.array([1, 3])
INDEXINGS = {
    "rows": lambda x, i, j: x[i, :],  # x[i] alone: the tracer fails closed (env probe)
    "middle_axis": lambda x, i, j: x[:, i],
    "sliced_and_gathered": lambda x, i, j: x[1:, ::-1, j],
    "two_adjacent_inside": lambda x, i, j: x[:, i, j],
    "two_apart": lambda x, i, j: x[i, :, j],
    "two_leading": lambda x, i, j: x[i, j],
}


@pytest.mark.parametrize("name", list(INDEXINGS))
def test_advanced_indexing(name):
    fn = INDEXINGS[name]
    x = dualflow.randn(3, 4, 5)
    i, j = dualflow.tensor(I), dualflow.tensor(J)
    want = fn(x, i, j).numpy()
    np.testing.assert_array_equal(want, fn(x.numpy(), I, J))  # numpy's own placement
    proto = dualflow.onnx.export(fn, (x, i, j), input_names=["x", "i", "j"])
    session = ort.InferenceSession(proto.SerializeToString())
    feed = {"x": x.numpy(), "i": I, "j": J}
    feed = {k: v for k, v in feed.items() if k in {n.name for n in session.get_inputs()}}
    (got,) = session.run(None, feed)
    np.testing.assert_array_equal(got, want)


def test_arrays_mixed_with_ints_are_refused():
    def fn(x, i):
        return x[0, :, i]

    with pytest.raises(dualflow.errors.ExportError, match=r"getitem_array.*mixes arrays with ints"):
        dualflow.onnx.export(fn, (dualflow.randn(3, 4, 5), dualflow.tensor(J)))


@pytest.mark.parametrize("descending", [False, True])
def test_argsort_keeps_ties_in_order(descending):
    x = dualflow.tensor(np.array([[3.0, 1.0, 3.0, 1.0, 2.0, 3.0], [0.0, 0.0, 0.0, 1.0, 1.0, 0.0]]))
    x = x.float()

    def fn(x):
        return dualflow.argsort(x, dim=1, descending=descending)

    proto = dualflow.onnx.export(fn, (x,))
    (got,) = ort.InferenceSession(proto.SerializeToString()).run(None, {"x": x.numpy()})
    np.testing.assert_array_equal(got, fn(x).numpy())
