"""Module's PyTorch API: traversal, registration, dtype/device moves, zero_grad, state dicts in
PyTorch's order and format, and AttributeErrors that say what to use instead."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import nn, optim
from dualflow.errors import ShapeError


def net() -> nn.Module:
    return nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3), nn.Linear(3, 1))


def test_state_dict_is_module_by_module_as_pytorch() -> None:
    assert list(net().state_dict()) == [
        "0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var",
        "1.num_batches_tracked", "2.weight", "2.bias",
    ]  # fmt: skip
    state = net().state_dict()
    assert not state["0.weight"].requires_grad  # detached, sharing memory (keep_vars=False)
    model = net()
    assert model.state_dict(keep_vars=True)["0.weight"] is model[0].weight
    assert next(iter(model.state_dict(prefix="m."))) == "m.0.weight"


def test_traversal_parameters_buffers_children() -> None:
    model = net()
    assert [n for n, _ in model.named_parameters(prefix="net")][:2] == [
        "net.0.weight",
        "net.0.bias",
    ]
    assert list(model.parameters(recurse=False)) == []
    assert len(list(model.parameters())) == 6 and len(list(model.params())) == 6
    assert [n for n, _ in model.named_buffers()] == [
        "1.running_mean", "1.running_var", "1.num_batches_tracked",
    ]  # fmt: skip
    shared = nn.Linear(2, 2)
    twice = nn.Sequential(shared, shared)
    assert len(list(twice.children())) == 1 and len(list(twice.modules())) == 2
    assert len(list(twice.named_modules(remove_duplicate=False))) == 3
    assert model.get_submodule("1") is model[1]
    assert model.get_parameter("2.bias") is model[2].bias
    assert model.get_buffer("1.running_var") is model[1].running_var
    assert model._parameters is model._params  # PyTorch's attribute name


def test_register_buffer_parameter_and_module() -> None:
    m = nn.Module()
    m.register_buffer("steps", dualflow.tensor(0), persistent=False)
    m.register_buffer("kept", dualflow.tensor([1.0]))
    m.register_parameter("scale", nn.Parameter(np.ones(2, np.float32)))
    m.register_parameter("shift", None)
    m.add_module("child", nn.Linear(2, 2))
    assert list(m.state_dict()) == ["scale", "kept", "child.weight", "child.bias"]
    assert [n for n, _ in m.named_buffers()] == ["steps", "kept"]
    assert m.shift is None
    with pytest.raises(KeyError, match=r"'\.'"):
        m.register_buffer("a.b", None)
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("forward", None)
    with pytest.raises(TypeError, match="Parameter"):
        m.scale = dualflow.tensor([1.0, 2.0])  # a plain tensor over a parameter name
    with pytest.raises(TypeError, match="buffer"):
        m.kept = 3


def test_apply_to_float_double_and_requires_grad() -> None:
    model = net()
    model.apply(lambda mod: nn.init.zeros_(mod.bias) if isinstance(mod, nn.Linear) else None)
    assert model[0].bias.tolist() == [0.0, 0.0, 0.0]
    weight = model[0].weight
    assert model.double() is model and weight.dtype == np.float64 and model[0].weight is weight
    assert model[1].num_batches_tracked.dtype == np.int64  # only floating tensors change dtype
    assert model.to(dtype="float32")[1].running_mean.dtype == np.float32
    assert model.cpu() is model and model.to("cpu", "float64")[2].bias.dtype == np.float64
    model.requires_grad_(False)
    assert not any(p.requires_grad for p in model.parameters())
    with pytest.raises(dualflow.errors.DTypeError, match="floating"):
        model.to("int32")


def test_zero_grad_set_to_none_false_keeps_zero_tensors() -> None:
    model = nn.Linear(2, 1)
    dualflow.ops.sum(model(np.ones((1, 2), np.float32))).backward()
    model.zero_grad(set_to_none=False)
    assert model.weight.grad.tolist() == [[0.0, 0.0]]
    opt = optim.SGD(model.parameters(), lr=0.1)
    opt.zero_grad()
    assert model.weight.grad is None


def test_load_state_dict_non_strict_reports_and_casts() -> None:
    model = nn.Linear(2, 1)
    result = model.load_state_dict({"weight": np.ones((1, 2)), "extra": np.zeros(1)}, strict=False)
    assert result.missing_keys == ["bias"] and result.unexpected_keys == ["extra"]
    assert model.weight.dtype == np.float32 and model.weight.tolist() == [[1.0, 1.0]]
    with pytest.raises(ShapeError, match="size mismatch for weight"):
        model.load_state_dict({"weight": np.ones((2, 2))}, strict=False)


def test_attribute_errors_say_what_to_use_instead() -> None:
    with pytest.raises(AttributeError, match="float16"):
        nn.Linear(1, 1).bfloat16()
    with pytest.raises(AttributeError, match="did you mean 'weight'"):
        nn.Linear(1, 1).weigth  # noqa: B018
    with pytest.raises(AttributeError, match="register_full_backward_hook"):
        nn.Linear(1, 1).register_backward_hook(print)
    with pytest.raises(AttributeError, match="per-process statistics"):
        nn.SyncBatchNorm  # noqa: B018
    with pytest.raises(AttributeError, match="Adam"):
        optim.Rprop  # noqa: B018
    with pytest.raises(AttributeError, match="after step"):
        optim.SGD([nn.Parameter(np.zeros(1))]).register_step_post_hook(print)
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        nn.Nope  # noqa: B018


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: nn.Conv1d(2, 3, 0), "kernel_size must be positive"),
        (lambda: nn.Conv2d(2, 3, 3, stride=0), "stride must be positive"),
        (lambda: nn.Conv1d(2, 3, 3, padding=-1), "padding must be non-negative"),
        (lambda: nn.MaxPool1d(2, padding=2), "at most half"),
        (lambda: nn.Dropout2d(-0.1), "between 0 and 1"),
        (lambda: nn.GRU(3, 0), "hidden_size must be a positive integer"),
        (lambda: nn.RNN(3, 4, num_layers=0), "num_layers must be a positive integer"),
        (lambda: nn.RNN(3, 4, nonlinearity="sigmoid"), "unknown nonlinearity"),
        (lambda: nn.LSTMCell(0, 4), "input_size must be a positive integer"),
        (lambda: nn.GRU(3, 4, dropout=1.5), "dropout should be a number in range"),
        (lambda: nn.MultiheadAttention(10, 3), "divisible by num_heads"),
        (lambda: nn.MultiheadAttention(8, 0), "num_heads must be a positive integer"),
        (lambda: nn.GroupNorm(3, 4), "divisible by num_groups"),
        (lambda: nn.InstanceNorm2d(0), "num_features must be a positive integer"),
        (lambda: nn.Upsample(scale_factor=2, mode="bicubic"), "mode must be one of"),
        (lambda: nn.Upsample(scale_factor=2, align_corners=True), "align_corners"),
        (lambda: nn.PixelShuffle(0), "upscale_factor must be a positive integer"),
        (lambda: nn.TransformerEncoderLayer(8, 2, activation="tanh"), "relu/gelu"),
        (lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2), 0), "num_layers"),
        (lambda: nn.AdaptiveAvgPool1d(0), "output_size must be positive"),
    ],
)
def test_constructor_arguments_are_validated(build, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build()


def test_unflatten_rejects_bad_sizes() -> None:
    with pytest.raises(TypeError, match="unflattened_size"):
        nn.Unflatten(1, 6)
    with pytest.raises(ShapeError, match="does not multiply"):
        nn.Unflatten(1, (2, 4))(np.zeros((2, 6)))


def test_forward_shape_errors_name_the_layer() -> None:
    with pytest.raises(ShapeError, match="GRU: expected a 2-D or 3-D input"):
        nn.GRU(3, 4)(np.zeros((2, 3, 4, 3), np.float32))
    with pytest.raises(ShapeError, match="expected h_0 of shape"):
        nn.GRU(3, 4)(np.zeros((5, 2, 3), np.float32), np.zeros((1, 3, 4), np.float32))
    mha = nn.MultiheadAttention(8, 2)
    q = np.zeros((4, 2, 8), np.float32)
    with pytest.raises(ShapeError, match="key_padding_mask has shape"):
        mha(q, q, q, key_padding_mask=np.zeros((2, 3), bool))
    with pytest.raises(ValueError, match="is_causal"):
        mha(q, q, q, is_causal=True)


def test_causal_mask_helper() -> None:
    mask = nn.Transformer.generate_square_subsequent_mask(3)
    assert mask.dtype == np.float32 and mask.tolist()[0] == [0.0, -np.inf, -np.inf]


def test_dict_and_list_containers_name_state_as_pytorch() -> None:
    m = nn.Module()
    m.heads = nn.ModuleDict({"a": nn.Linear(2, 3), "b": nn.Linear(3, 1)})
    m.ps = nn.ParameterList([nn.Parameter(np.zeros(2)), nn.Parameter(np.ones(1))])
    m.pd = nn.ParameterDict({"scale": nn.Parameter(np.ones(2))})
    assert list(m.state_dict()) == [  # read from torch 2.13 for the same structure
        "heads.a.weight", "heads.a.bias", "heads.b.weight", "heads.b.bias", "ps.0", "ps.1",
        "pd.scale",
    ]  # fmt: skip
    assert len(list(optim.SGD(m.parameters(), lr=0.1).param_groups[0]["params"])) == 7
    del m.heads["b"]
    assert list(m.heads) == ["a"] and m.heads.pop("a").out_features == 3 and len(m.heads) == 0
