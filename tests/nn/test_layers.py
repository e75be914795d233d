"""Dropout, Embedding, activations, pooling, Flatten/Identity and the containers."""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import pytest

import dualflow
from dualflow import nn
from dualflow.errors import ShapeError
from dualflow.gradcheck import check_backward


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


# ----- Dropout --------------------------------------------------------------------------------
def test_dropout_eval_is_identity() -> None:
    x = dualflow.tensor(rand(100))
    drop = nn.Dropout(0.3)
    assert drop.eval()(x) is x
    drop.train()
    with dualflow.using_config(train=False):
        assert drop(x) is x


@pytest.mark.parametrize("p", [0.2, 0.5, 0.9])
def test_dropout_train_zeroes_about_p_and_scales_the_rest(p: float) -> None:
    x = np.ones((200, 100), np.float32)
    y = nn.Dropout(p)(x).numpy()
    zero = y == 0
    assert zero.mean() == pytest.approx(p, abs=0.02)
    np.testing.assert_allclose(y[~zero], 1 / (1 - p), rtol=1e-6)


def test_dropout_masks_follow_the_seed_and_gradients_use_the_mask() -> None:
    drop = nn.Dropout(0.5)
    dualflow.random.seed(3)
    a = drop(np.ones(50, np.float32)).numpy()
    b = drop(np.ones(50, np.float32)).numpy()
    dualflow.random.seed(3)
    np.testing.assert_array_equal(drop(np.ones(50, np.float32)).numpy(), a)
    assert not np.array_equal(a, b)
    x = dualflow.tensor(np.ones(50, np.float32), requires_grad=True)
    dualflow.random.seed(3)
    drop(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), a)


def test_dropout_edge_probabilities() -> None:
    x = np.ones(10, np.float32)
    assert (nn.Dropout(1.0)(x).numpy() == 0).all()
    np.testing.assert_array_equal(nn.Dropout(0.0)(x), x)
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)


# ----- Embedding -------------------------------------------------------------------------------
def test_embedding_lookup_names_and_init() -> None:
    emb = nn.Embedding(1000, 64)
    assert {k: v.shape for k, v in emb.state_dict().items()} == {"weight": (1000, 64)}
    w = emb.weight.numpy()
    assert w.mean() == pytest.approx(0.0, abs=0.01) and w.std() == pytest.approx(1.0, rel=0.02)
    ids = np.array([[3, 7, 3], [0, 999, 1]])
    np.testing.assert_array_equal(emb(ids).numpy(), w[ids])


def test_embedding_gradient_accumulates_repeated_ids() -> None:
    emb = nn.Embedding(5, 2)
    emb(np.array([1, 1, 4])).sum().backward()
    np.testing.assert_array_equal(emb.weight.grad.numpy()[:, 0], [0, 2, 0, 0, 1])


def test_embedding_padding_idx_is_zero_and_gets_no_gradient() -> None:
    emb = nn.Embedding(4, 3, padding_idx=-1)
    assert emb.padding_idx == 3 and repr(emb) == "Embedding(4, 3, padding_idx=3)"
    assert (emb.weight.numpy()[3] == 0).all() and (emb.weight.numpy()[:3] != 0).all()
    with dualflow.no_grad():
        dualflow.ops.assign(emb.weight, np.arange(12.0).reshape(4, 3))
    ids = np.array([3, 0, 3])
    y = emb(ids)
    np.testing.assert_array_equal(y.numpy(), emb.weight.numpy()[ids])  # values unchanged
    y.sum().backward()
    np.testing.assert_array_equal(emb.weight.grad.numpy()[:, 0], [1, 0, 0, 0])


# ----- activations -------------------------------------------------------------------------------
def _erf(v: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf)(v)


ACTIVATIONS = [
    (nn.ReLU(), lambda x: np.maximum(x, 0)),
    (nn.LeakyReLU(), lambda x: np.where(x > 0, x, 0.01 * x)),
    (nn.LeakyReLU(0.3), lambda x: np.where(x > 0, x, 0.3 * x)),
    (nn.ELU(), lambda x: np.where(x > 0, x, np.expm1(x))),
    (nn.ELU(alpha=0.5), lambda x: np.where(x > 0, x, 0.5 * np.expm1(x))),
    (nn.GELU(), lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2)))),
    (nn.GELU("tanh"),
     lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))),
    (nn.SiLU(), lambda x: x / (1 + np.exp(-x))),
    (nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
    (nn.Tanh(), np.tanh),
    (nn.Softplus(), lambda x: np.log1p(np.exp(x))),
    (nn.Softplus(beta=2.0, threshold=3.0),
     lambda x: np.where(2 * x > 3, x, np.log1p(np.exp(2 * x)) / 2)),
    (nn.Softmax(dim=1), lambda x: np.exp(x) / np.exp(x).sum(1, keepdims=True)),
    (nn.LogSoftmax(dim=0), lambda x: x - np.log(np.exp(x).sum(0, keepdims=True))),
    (nn.Identity(), lambda x: x),
]  # fmt: skip


@pytest.mark.parametrize(("module", "ref"), ACTIVATIONS, ids=lambda v: repr(v)[:30])
def test_activation_matches_numpy(module: nn.Module, ref) -> None:
    x = rand(4, 5) * 3
    assert module.state_dict() == {}
    np.testing.assert_allclose(np.asarray(module(x)), ref(x), rtol=1e-10, atol=1e-12)
    if not isinstance(module, nn.Identity):
        check_backward(module, [x + 0.01])  # avoid the kinks at exactly 0


def test_activation_reprs_match_pytorch() -> None:
    assert repr(nn.ReLU()) == "ReLU()"
    assert repr(nn.ReLU(inplace=True)) == "ReLU(inplace=True)"
    assert repr(nn.LeakyReLU()) == "LeakyReLU(negative_slope=0.01)"
    assert repr(nn.ELU()) == "ELU(alpha=1.0)"
    assert repr(nn.GELU()) == "GELU(approximate='none')"
    assert repr(nn.Softmax(1)) == "Softmax(dim=1)"
    assert repr(nn.Softplus()) == "Softplus(beta=1.0, threshold=20.0)"
    with pytest.raises(ValueError, match="approximate"):
        nn.GELU("erf")


def test_softmax_implicit_dim_warns_like_pytorch() -> None:
    with pytest.warns(UserWarning, match="Implicit dimension"):
        y = nn.Softmax()(rand(2, 3))
    np.testing.assert_allclose(y.numpy().sum(1), 1.0)


# ----- pooling --------------------------------------------------------------------------------
def _pool_ref(x: np.ndarray, k: int, s: int, reduce) -> np.ndarray:
    n, c, h, w = x.shape
    ho, wo = (h - k) // s + 1, (w - k) // s + 1
    out = np.empty((n, c, ho, wo))
    for i in range(ho):
        for j in range(wo):
            out[:, :, i, j] = reduce(x[:, :, i * s : i * s + k, j * s : j * s + k], axis=(2, 3))
    return out


def test_max_and_avg_pool_match_the_reference() -> None:
    x = rand(2, 3, 7, 6)
    np.testing.assert_allclose(nn.MaxPool2d(3, 2)(x).numpy(), _pool_ref(x, 3, 2, np.max))
    np.testing.assert_allclose(nn.AvgPool2d(2)(x).numpy(), _pool_ref(x, 2, 2, np.mean))
    assert nn.MaxPool2d(3, 2, 1)(x).shape == (2, 3, 4, 3)
    assert repr(nn.MaxPool2d(2)) == (
        "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"
    )
    assert repr(nn.AvgPool2d(3, 1)) == "AvgPool2d(kernel_size=3, stride=1, padding=0)"
    with pytest.raises(NotImplementedError):
        nn.MaxPool2d(2, ceil_mode=True)
    with pytest.raises(NotImplementedError):
        nn.AvgPool2d(2, count_include_pad=False)


def test_adaptive_avg_pool() -> None:
    x = rand(2, 3, 4, 6)
    y = nn.AdaptiveAvgPool2d((1, 1))(x)
    assert y.shape == (2, 3, 1, 1)
    np.testing.assert_allclose(y.numpy(), x.mean(axis=(2, 3), keepdims=True))
    assert nn.AdaptiveAvgPool2d(1)(x).shape == (2, 3, 1, 1)
    np.testing.assert_allclose(nn.AdaptiveAvgPool2d((2, 3))(x).numpy(), _pool_ref(x, 2, 2, np.mean))
    assert nn.AdaptiveAvgPool2d((None, 2))(x).shape == (2, 3, 4, 2)
    assert repr(nn.AdaptiveAvgPool2d((1, 1))) == "AdaptiveAvgPool2d(output_size=(1, 1))"
    odd = nn.AdaptiveAvgPool2d((3, 4))(x).numpy()  # PyTorch's windows: floor/ceil bounds
    assert odd.shape == (2, 3, 3, 4)
    np.testing.assert_allclose(odd[:, :, 1, 2], x[:, :, 1:3, 3:5].mean(axis=(2, 3)), rtol=1e-6)
    with pytest.raises(ValueError, match="positive"):
        nn.AdaptiveAvgPool2d(0)(x)
    with pytest.raises(ShapeError):
        nn.AdaptiveAvgPool2d(1)(rand(3, 4))


# ----- Flatten, containers -------------------------------------------------------------------
def test_flatten() -> None:
    x = rand(2, 3, 4, 5)
    assert nn.Flatten()(x).shape == (2, 60)
    assert nn.Flatten(0, 2)(x).shape == (24, 5)
    assert nn.Flatten(-2)(x).shape == (2, 3, 20)
    np.testing.assert_array_equal(nn.Flatten()(x).numpy(), x.reshape(2, -1))
    assert repr(nn.Flatten()) == "Flatten(start_dim=1, end_dim=-1)"
    with pytest.raises(ShapeError):
        nn.Flatten(2, 1)(x)


def test_sequential_names_indexing_and_forward() -> None:
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    assert list(net.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert len(net) == 3 and isinstance(net[1], nn.ReLU) and net[-1] is net[2]
    assert [type(m).__name__ for m in net] == ["Linear", "ReLU", "Linear"]
    head = net[1:]
    assert isinstance(head, nn.Sequential) and list(head.state_dict()) == ["2.weight", "2.bias"]
    x = rand(5, 4).astype(np.float32)
    ref = np.maximum(x @ net[0].weight.numpy().T + net[0].bias.numpy(), 0)
    ref = ref @ net[2].weight.numpy().T + net[2].bias.numpy()
    np.testing.assert_allclose(net(x).numpy(), ref, rtol=1e-5, atol=1e-6)
    net.append(nn.Tanh())
    assert len(net) == 4 and "(3): Tanh()" in repr(net)
    net[0] = nn.Linear(4, 3, bias=False)
    assert list(net.state_dict())[:3] == ["0.weight", "2.weight", "2.bias"]
    with pytest.raises(IndexError):
        net[7]
    with pytest.raises(TypeError):
        nn.Sequential(nn.ReLU(), lambda x: x)


def test_sequential_from_ordered_dict_keeps_names() -> None:
    net = nn.Sequential(OrderedDict(conv=nn.Conv2d(1, 2, 3), act=nn.ReLU()))
    assert list(net.state_dict()) == ["conv.weight", "conv.bias"]
    assert net[0] is net.conv
    assert repr(net).splitlines()[1] == "  (conv): Conv2d(1, 2, kernel_size=(3, 3), stride=(1, 1))"


def test_module_list() -> None:
    layers = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 3)])
    layers.append(nn.Linear(3, 4))
    layers.extend([nn.Linear(4, 5)])
    layers += [nn.Linear(5, 6)]
    assert len(layers) == 5 and [m.out_features for m in layers] == [2, 3, 4, 5, 6]
    assert layers[-1].in_features == 5 and layers[1:3][0].out_features == 3
    layers.insert(0, nn.Identity())
    assert isinstance(layers[0], nn.Identity) and layers[1].out_features == 2
    del layers[0]
    assert [n for n, _ in layers.named_children()] == ["0", "1", "2", "3", "4"]
    assert [k for k in layers.state_dict()][:2] == ["0.weight", "0.bias"]
    layers[0] = nn.Linear(2, 2, bias=False)
    assert "0.bias" not in layers.state_dict()
    with pytest.raises(NotImplementedError):
        layers(1)


def test_containers_propagate_train_and_eval() -> None:
    net = nn.Sequential(nn.Linear(2, 2), nn.ModuleList([nn.Dropout(), nn.BatchNorm1d(2)]))
    net.eval()
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
