"""What cannot be exported fails with an ExportError naming the op and the user's line."""

from __future__ import annotations

import pytest

import dualflow
from dualflow import nn
from dualflow.onnx import ExportError

pytest.importorskip("onnx", reason="the onnx package is optional (pip install .[onnx])")
HERE = __file__.rsplit("/", 1)[-1]


def test_training_mode_is_refused():
    model = nn.Sequential(nn.Linear(3, 2), nn.Dropout(0.5))
    with pytest.raises(ExportError, match=r"Sequential is in training mode; call \.eval\(\)"):
        dualflow.onnx.export(model, (dualflow.randn(2, 3),))


def test_an_op_without_converter_names_the_op_and_line():
    def fn(x):
        dualflow.debug.print("x {}", x)  # the line the error names
        return x * 2

    line = fn.__code__.co_firstlineno + 1
    with pytest.raises(ExportError, match=rf"op 'debug_print' at .*{HERE}:{line}: no ONNX"):
        dualflow.onnx.export(fn, (dualflow.randn(2, 3),))


def test_control_flow_on_a_value_is_refused():
    def fn(x):
        if x.sum() > 0:
            return x * 2
        return x

    with pytest.raises(ExportError, match=r"op 'guard' at .*control flow"):
        dualflow.onnx.export(fn, (dualflow.ones(2, 3),))


def test_a_reshape_that_fixes_the_dynamic_axis():
    def fn(x):
        return x.reshape(x.shape[0] * 3, -1)

    with pytest.raises(ExportError, match=r"op 'reshape' at .*depends on a dynamic axis"):
        dualflow.onnx.export(fn, (dualflow.randn(2, 3, 4),), dynamic_axes={"x": {0: "b"}})


def test_control_flow_on_a_dynamic_size_is_refused():
    def fn(x):
        return x * 2 if x.shape[0] == 2 else x + 1

    with pytest.raises(ExportError, match="different ops for another size"):
        dualflow.onnx.export(fn, (dualflow.randn(2, 3),), dynamic_axes={"x": {0: "b"}})


def test_unknown_dynamic_axes_names():
    with pytest.raises(ExportError, match=r"dynamic_axes names \['y'\]"):
        dualflow.onnx.export(lambda x: x * 2, (dualflow.randn(2, 3),), dynamic_axes={"y": {0: "b"}})
    with pytest.raises(ExportError, match="does not change"):
        dualflow.onnx.export(
            lambda x: x.sum(0),
            (dualflow.randn(2, 3),),
            dynamic_axes={"x": {0: "b"}, "output": {0: "b"}},
        )


def test_random_sampling_is_refused_naming_the_generator():
    with pytest.raises(ExportError, match="writes state"):
        dualflow.onnx.export(lambda x: x + dualflow.randn_like(x), (dualflow.randn(2, 3),))


def test_state_writes_are_refused():
    model = nn.BatchNorm1d(3)

    def fn(x):
        return model(x)  # training-mode BN inside a plain function: updates running stats

    with pytest.raises(ExportError, match="writes state"):
        dualflow.onnx.export(fn, (dualflow.randn(4, 3),))
