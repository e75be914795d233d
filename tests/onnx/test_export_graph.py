"""export_graph: optimized graphs (fused nodes expanded back) and saved graph files."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import graph_ir, nn
from dualflow.vision.models import mobilenet_v2, resnet18
from tests.onnx.helpers import relative_error

ort = pytest.importorskip("onnxruntime", reason="ONNX Runtime is optional (pip install .[onnx])")
pytest.importorskip("onnx", reason="the onnx package is optional (pip install .[onnx])")


def optimized(model, x):
    compiled = dualflow.compile(model)  # the default passes: fusion included
    with dualflow.no_grad():
        compiled(x)
    trace = compiled.history[-1]
    return trace.graph, [ref.read() for ref in trace.checks.refs]


MODELS = {
    "resnet18": lambda: resnet18(num_classes=10, cifar_stem=True, width=0.25),
    "mobilenet_v2": lambda: mobilenet_v2(num_classes=10, cifar_stem=True, width=0.25),
    "mlp_gelu_layernorm": lambda: nn.Sequential(
        nn.Linear(12, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 3), nn.Softplus()
    ),
}


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("fold", [True, False])
def test_fused_graphs_match_eager(name, fold):
    dualflow.manual_seed(0)
    model = MODELS[name]().eval()
    # the MLP's rows: enough elements (512 x 8) for its bias + GELU to fuse on the CPU
    x = dualflow.randn(2, 3, 32, 32) if name != "mlp_gelu_layernorm" else dualflow.randn(512, 12)
    graph, state = optimized(model, x)
    assert any(n.op == "fused" for n in graph.nodes)
    proto = dualflow.onnx.export_graph(graph, state, fold_constants=fold)
    session = ort.InferenceSession(proto.SerializeToString())
    (got,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    assert relative_error(got, model(x).numpy()) <= 1e-5


def test_a_saved_graph_file(tmp_path):
    dualflow.manual_seed(0)
    model = resnet18(num_classes=10, cifar_stem=True, width=0.125).eval()
    x = dualflow.randn(2, 3, 32, 32)
    graph, state = optimized(model, x)
    graph_ir.save(graph, str(tmp_path / "net"), state)
    loaded, loaded_state = graph_ir.load(str(tmp_path / "net"))
    dualflow.onnx.export_graph(loaded, loaded_state, tmp_path / "net.onnx")
    session = ort.InferenceSession(str(tmp_path / "net.onnx"))
    (got,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    assert relative_error(got, model(x).numpy()) <= 1e-5


def test_training_graphs_and_missing_state_are_refused():
    model = nn.Linear(3, 2)
    graph, state = optimized(model.eval(), dualflow.randn(2, 3))
    with pytest.raises(dualflow.onnx.ExportError, match="reads 2 state arrays, 0 given"):
        dualflow.onnx.export_graph(graph)
    bn = nn.BatchNorm1d(3)
    compiled = dualflow.compile(bn)
    with dualflow.no_grad():
        compiled(dualflow.randn(4, 3))
    trace = compiled.history[-1]
    with pytest.raises(dualflow.onnx.ExportError, match="writes state"):
        dualflow.onnx.export_graph(trace.graph, [r.read() for r in trace.checks.refs])
    assert np.isfinite(state[0]).all()


ELEMENTWISE = {
    "leaky": lambda x, y: dualflow.where(x > 0, x, x * 0.1) + y.abs().sqrt(),
    "compare_cast": lambda x, y: ((x >= y).float() * 2 - (x != y).float()) / (1 + y.exp()),
    "log1p_expm1": lambda x, y: dualflow.log1p(y.abs()) - dualflow.expm1(x * 0.5).tanh(),
    "max_min_pow": lambda x, y: dualflow.maximum(x, y) ** 2 + dualflow.minimum(x, 0.3).sin(),
    "float64": lambda x, y: (x.double() * y.double()).exp().float() + x.sin(),
    "sum_of_squares": lambda x, y: ((x - y) * (x - y)).sum() + (x.erf() * y).sum(),
    "negate_divide": lambda x, y: -x / (y.abs() + 1) + x.cos(),
}


@pytest.mark.parametrize("name", list(ELEMENTWISE))
def test_fused_expressions(name):
    fn = ELEMENTWISE[name]
    x, y = dualflow.randn(64, 128), dualflow.randn(128)  # big enough for the fuse pass
    compiled = dualflow.compile(fn)
    with dualflow.no_grad():
        compiled(x, y)
    graph = compiled.history[-1].graph
    assert any(n.op == "fused" for n in graph.nodes), [n.op for n in graph.nodes]
    proto = dualflow.onnx.export_graph(graph)
    session = ort.InferenceSession(proto.SerializeToString())
    inputs = [i.name for i in session.get_inputs()]
    (got,) = session.run(None, dict(zip(inputs, (x.numpy(), y.numpy()), strict=True)))
    want = fn(x, y).numpy()
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
