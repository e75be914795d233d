"""The zoo, the MLP, the word LM and the transformer port, exported and run by ONNX Runtime with
two batch sizes along a dynamic batch axis: within 1e-5 (relative) of dualflow's eager output."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import dualflow
from dualflow import nn
from dualflow.vision.models import mobilenet_v2, resnet18, resnet50, vgg16
from tests.onnx.helpers import check_export, relative_error

ort = pytest.importorskip("onnxruntime", reason="ONNX Runtime is optional (pip install .[onnx])")
onnx = pytest.importorskip("onnx", reason="the onnx package is optional (pip install .[onnx])")
PORT = Path(__file__).resolve().parents[2] / "examples/ports/word_language_model/model.py"
BATCH = {"x": {0: "batch"}, "output": {0: "batch"}}


def images(size: int):
    return (dualflow.randn(size, 3, 32, 32),)


@pytest.mark.parametrize(
    "make",
    [
        lambda: resnet18(num_classes=10, cifar_stem=True, width=0.25),
        lambda: resnet50(num_classes=10, cifar_stem=True, width=0.125),
        lambda: vgg16(num_classes=10, cifar_stem=True, width=0.125),
        lambda: mobilenet_v2(num_classes=10, cifar_stem=True, width=0.25),
    ],
    ids=["resnet18", "resnet50", "vgg16", "mobilenet_v2"],
)
def test_vision_models(make, tmp_path):
    dualflow.manual_seed(0)
    model = make().eval()
    proto = check_export(ort, model, images, ["x"], BATCH, tmp_path / "m.onnx", sizes=(2, 5))
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert proto.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    onnx.checker.check_model(onnx.load(tmp_path / "m.onnx"))


def test_batchnorm_kept_instead_of_folded(tmp_path):
    dualflow.manual_seed(0)
    model = resnet18(num_classes=10, cifar_stem=True, width=0.125).eval()
    folded = check_export(ort, model, images, ["x"], BATCH, tmp_path / "a.onnx")
    kept = check_export(ort, model, images, ["x"], BATCH, tmp_path / "b.onnx", fold_constants=False)
    ops = [n.op_type for n in kept.graph.node]
    assert "Sqrt" in ops and "Sqrt" not in [n.op_type for n in folded.graph.node]


def test_mlp(tmp_path):
    dualflow.manual_seed(0)
    model = nn.Sequential(
        nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 10)
    ).eval()
    check_export(
        ort, model, lambda n: (dualflow.randn(n, 1, 8, 8),), ["x"], BATCH, tmp_path / "m.onnx"
    )


def port_model():
    spec = importlib.util.spec_from_file_location("word_language_model_model", PORT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN_TANH"])
def test_word_language_model(kind, tmp_path):
    dualflow.manual_seed(0)
    model = port_model().RNNModel(kind, 50, 16, 16, 2, dropout=0.2).eval()
    lstm = kind == "LSTM"

    def forward(ids, *state):
        log_probs, hidden = model(ids, tuple(state) if lstm else state[0])
        return (log_probs, *hidden) if lstm else (log_probs, hidden)

    def make(batch):
        ids = dualflow.randint(0, 50, (7, batch))
        return (ids, *(dualflow.randn(2, batch, 16) for _ in range(2 if lstm else 1)))

    names = ["ids", "h0", "c0"][: 3 if lstm else 2]
    axes = {name: {1: "batch"} for name in names}
    check_export(ort, forward, make, names, axes, tmp_path / "lm.onnx", sizes=(3, 5))


@pytest.mark.filterwarnings("ignore:divide by zero")  # the port's mask is log(tril(ones))
def test_transformer_port(tmp_path):
    dualflow.manual_seed(0)
    model = port_model().TransformerModel(50, 16, 2, 32, 2, dropout=0.2).eval()
    model(dualflow.randint(0, 50, (7, 2)))  # builds its causal mask (a Python attribute) once

    def make(batch):
        return (dualflow.randint(0, 50, (7, batch)),)

    check_export(ort, model, make, ["src"], {"src": {1: "batch"}}, tmp_path / "t.onnx")


def test_nested_arguments_become_named_inputs(tmp_path):
    dualflow.manual_seed(0)
    model = port_model().RNNModel("LSTM", 30, 8, 8, 1, dropout=0.0).eval()
    ids, hidden = (
        dualflow.randint(0, 30, (5, 2)),
        (dualflow.randn(1, 2, 8), dualflow.randn(1, 2, 8)),
    )
    proto = dualflow.onnx.export(model, (ids, hidden), tmp_path / "lm.onnx")
    assert [i.name for i in proto.graph.input] == ["input", "hidden_0", "hidden_1"]
    session = ort.InferenceSession(str(tmp_path / "lm.onnx"))
    feed = {"input": ids.numpy(), "hidden_0": hidden[0].numpy(), "hidden_1": hidden[1].numpy()}
    log_probs, h, c = session.run(None, feed)
    want, (want_h, want_c) = model(ids, hidden)
    for got, expected in ((log_probs, want), (h, want_h), (c, want_c)):
        assert relative_error(got, expected.numpy()) <= 1e-5
