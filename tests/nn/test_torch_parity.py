"""Parity with PyTorch (skipped without torch): state-dict keys, forward values, BN statistics.

Weights are copied from the torch module into ours by name with ``load_state_dict``, which is
itself the check that names and shapes agree.
"""

from __future__ import annotations

import numpy as np
import pytest

from dualflow import nn
from dualflow.nn import init

torch = pytest.importorskip("torch")
tnn = torch.nn


def copy_from_torch(ours: nn.Module, theirs) -> None:
    state = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
    assert list(ours.state_dict()) == list(state)
    for k, v in ours.state_dict().items():
        assert v.shape == state[k].shape, k
    ours.load_state_dict(state)


CASES = [
    (lambda m: m.Linear(5, 3), (4, 5)),
    (lambda m: m.Linear(5, 3, bias=False), (2, 7, 5)),
    (lambda m: m.Conv2d(4, 6, 3, stride=2, padding=1, groups=2), (2, 4, 7, 7)),
    (lambda m: m.Conv2d(3, 5, (2, 3), dilation=(2, 1), padding="same"), (1, 3, 6, 7)),
    (lambda m: m.Conv2d(3, 5, 3, padding=2, padding_mode="reflect"), (1, 3, 6, 7)),
    (lambda m: m.ConvTranspose2d(4, 6, 3, 2, 1, 1, groups=2, dilation=2), (2, 4, 5, 5)),
    (lambda m: m.LayerNorm((3, 4)), (2, 5, 3, 4)),
    (lambda m: m.MaxPool2d(3, 2, 1), (2, 3, 7, 7)),
    (lambda m: m.AvgPool2d(2, 1, 1), (2, 3, 5, 5)),
    (lambda m: m.AdaptiveAvgPool2d((1, 1)), (2, 3, 5, 5)),
    (lambda m: m.Flatten(), (2, 3, 4)),
    (lambda m: m.LeakyReLU(), (3, 4)),
    (lambda m: m.GELU(approximate="tanh"), (3, 4)),
    (lambda m: m.Softplus(beta=2.0, threshold=1.0), (3, 4)),
    (lambda m: m.LogSoftmax(dim=1), (3, 4)),
    (lambda m: m.Sequential(m.Linear(4, 8), m.ELU(), m.Dropout(), m.Linear(8, 2)), (3, 4)),
]


@pytest.mark.parametrize(("build", "shape"), CASES, ids=lambda v: getattr(v, "__name__", None))
def test_forward_matches_torch(build, shape) -> None:
    theirs, ours = build(tnn).double().eval(), build(nn).eval()
    copy_from_torch(ours, theirs)
    x = np.random.default_rng(0).standard_normal(shape)
    expected = theirs(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(ours(x).numpy(), expected, rtol=1e-6, atol=1e-6)
    assert repr(ours) == repr(theirs)


def test_batchnorm_training_matches_torch() -> None:
    theirs, ours = tnn.BatchNorm2d(3, momentum=0.3).double(), nn.BatchNorm2d(3, momentum=0.3)
    with torch.no_grad():
        theirs.weight.uniform_(0.5, 2.0)
        theirs.bias.uniform_(-1.0, 1.0)
    copy_from_torch(ours, theirs)
    rng = np.random.default_rng(1)
    for _ in range(3):
        x = rng.standard_normal((4, 3, 5, 5)) * 2 + 1
        expected = theirs(torch.from_numpy(x)).detach().numpy()
        np.testing.assert_allclose(ours(x).numpy(), expected, rtol=1e-5, atol=1e-5)
    for k, v in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[k].numpy(), v.numpy(), rtol=1e-5)
    x = rng.standard_normal((2, 3, 5, 5))
    expected = theirs.eval()(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(ours.eval()(x).numpy(), expected, rtol=1e-5, atol=1e-5)
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize(
    "kwargs",
    [{"num_layers": 2}, {"num_layers": 2, "bidirectional": True, "batch_first": True}],
)
def test_lstm_matches_torch_including_gradients(kwargs: dict) -> None:
    theirs, ours = tnn.LSTM(3, 4, **kwargs).double(), nn.LSTM(3, 4, dtype="float64", **kwargs)
    copy_from_torch(ours, theirs)
    x = np.random.default_rng(2).standard_normal((2, 5, 3))
    tx = torch.from_numpy(x).requires_grad_()
    t_out, (t_h, t_c) = theirs(tx)
    out, (h, c) = ours(x)
    for a, b in ((out, t_out), (h, t_h), (c, t_c)):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)
    (t_out.sum() + (t_c * t_c).sum()).backward()
    (out.sum() + (c * c).sum()).backward()
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(
            ours.get_parameter(name).grad.numpy(), p.grad.numpy(), rtol=1e-9, atol=1e-12
        )
    assert repr(ours) == repr(theirs)


def test_lstm_cell_and_embedding_match_torch() -> None:
    theirs, ours = tnn.LSTMCell(3, 2).double(), nn.LSTMCell(3, 2, dtype="float64")
    copy_from_torch(ours, theirs)
    x = np.random.default_rng(3).standard_normal((4, 3))
    for a, b in zip(ours(x), theirs(torch.from_numpy(x))):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-10)
    t_emb, emb = tnn.Embedding(6, 3, padding_idx=2), nn.Embedding(6, 3, padding_idx=2)
    copy_from_torch(emb, t_emb)
    ids = np.array([[0, 2, 5], [2, 2, 1]])
    np.testing.assert_array_equal(emb(ids).numpy(), t_emb(torch.from_numpy(ids)).detach().numpy())
    assert repr(emb) == repr(t_emb)


def test_init_helpers_match_torch() -> None:
    for name, arg in [("relu", None), ("leaky_relu", 0.2), ("tanh", None), ("selu", None)]:
        assert init.calculate_gain(name, arg) == pytest.approx(tnn.init.calculate_gain(name, arg))
    for shape in [(5, 3), (8, 4, 3, 2), (4, 2, 1, 1)]:
        expected = tnn.init._calculate_fan_in_and_fan_out(torch.empty(shape))
        assert init.fan_in_and_fan_out(np.empty(shape)) == expected


def test_state_dict_keys_match_torch_for_every_layer() -> None:
    for build in [
        lambda m: m.BatchNorm1d(4),
        lambda m: m.BatchNorm1d(4, affine=False),
        lambda m: m.BatchNorm2d(4, track_running_stats=False),
        lambda m: m.BatchNorm2d(4, bias=False),
        lambda m: m.LayerNorm(4, bias=False),
        lambda m: m.LSTM(3, 4, 3, bias=False, bidirectional=True),
        lambda m: m.ModuleList([m.Conv2d(1, 2, 3), m.ConvTranspose2d(2, 1, 3, bias=False)]),
    ]:
        ours, theirs = build(nn), build(tnn)
        assert {k: v.shape for k, v in ours.state_dict().items()} == {
            k: tuple(v.shape) for k, v in theirs.state_dict().items()
        }
        assert repr(ours) == repr(theirs)
