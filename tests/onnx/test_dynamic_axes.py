"""Size-holding attributes under a dynamic axis: reshape, slices, broadcast, full_like."""

from __future__ import annotations

import pytest

import dualflow
from tests.onnx.helpers import check_export

ort = pytest.importorskip("onnxruntime", reason="ONNX Runtime is optional (pip install .[onnx])")
pytest.importorskip("onnx", reason="the onnx package is optional (pip install .[onnx])")


def rows(n: int):
    return (dualflow.randn(n, 3, 4),)


FUNCTIONS = {
    "view_batch_minus1": lambda x: x.view(x.shape[0], -1) * 2,
    "reshape_minus1_12": lambda x: x.reshape(-1, 12) + 1,
    "slice_rows_and_cols": lambda x: x[:, 1:, ::2] * 3,
    "select_in_row": lambda x: x[:, 0] - 1,
    "new_axis": lambda x: x[None, :, 2] + 1,
    "expand": lambda x: x[:, :1].expand(x.shape[0], 3, 4) + x,
    "ones_like": lambda x: dualflow.ones_like(x) + x,
    "mean_over_features": lambda x: x - x.mean(-1, keepdim=True),
    "softmax_rows": lambda x: x.softmax(-1),
}


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_two_batch_sizes(name, tmp_path):
    fn = FUNCTIONS[name]
    proto = check_export(ort, fn, rows, ["x"], {"x": {0: "n"}}, tmp_path / "f.onnx", (2, 5))
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "n"


def test_a_number_computed_from_the_dynamic_size_is_refused(tmp_path):
    def fn(x):
        return x - x.mean(0, keepdim=True)  # divides by the batch size

    with pytest.raises(dualflow.onnx.ExportError, match=r"op 'multiply' at .*dynamic axis"):
        dualflow.onnx.export(fn, rows(2), dynamic_axes={"x": {0: "n"}})
