"""Padding layers, PReLU, EmbeddingBag, DataParallel and Dropout2d's PyTorch behaviours that the
reference tables do not cover: reprs, refusals, warnings and random masks."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
import dualflow.nn.functional as F
from dualflow import nn
from dualflow.errors import ShapeError


def test_reprs_are_pytorch_s() -> None:
    assert repr(nn.ReflectionPad1d(2)) == "ReflectionPad1d((2, 2))"
    assert repr(nn.ZeroPad2d((1, 1, 2, 0))) == "ZeroPad2d((1, 1, 2, 0))"
    assert repr(nn.ConstantPad3d(1, 3.5)) == "ConstantPad3d(padding=(1, 1, 1, 1, 1, 1), value=3.5)"
    assert repr(nn.PReLU(3)) == "PReLU(num_parameters=3)"
    assert repr(nn.EmbeddingBag(10, 3, padding_idx=2)) == (
        "EmbeddingBag(10, 3, mode='mean', padding_idx=2)"
    )
    assert repr(nn.DataParallel(nn.Linear(2, 1))).startswith("DataParallel(\n  (module): Linear")


def test_padding_refusals() -> None:
    with pytest.raises(ShapeError, match=r"reflect padding \(3, 3\) must be narrower than dim 2"):
        nn.ReflectionPad1d(3)(dualflow.ones(1, 1, 3))
    with pytest.raises(ShapeError, match="pad a 3-D or 4-D input, got shape \\(4, 4\\)"):
        nn.ReplicationPad2d(1)(dualflow.ones(4, 4))
    assert nn.ConstantPad1d(1, 0.0)(dualflow.ones(2, 2, 2, 3)).shape == (2, 2, 2, 5)  # any rank
    with pytest.raises(ValueError, match="4 ints"):
        nn.ZeroPad2d((1, 2))


def test_data_parallel_delegates_and_prefixes_the_state_dict() -> None:
    inner = nn.Linear(3, 2)
    wrapped = nn.DataParallel(inner, device_ids=[0])
    assert wrapped.module is inner and list(wrapped.state_dict()) == [
        "module.weight",
        "module.bias",
    ]
    x = dualflow.randn(4, 3)
    np.testing.assert_array_equal(wrapped(x).numpy(), inner(x).numpy())
    state = {k: np.zeros(v.shape, np.float32) for k, v in wrapped.state_dict().items()}
    wrapped.load_state_dict(state)
    assert inner.weight.numpy().sum() == 0


def test_embedding_bag_padding_row_gets_no_gradient_and_refusals() -> None:
    bag = nn.EmbeddingBag(5, 2, mode="sum", padding_idx=0)
    assert bag.weight.numpy()[0].tolist() == [0.0, 0.0]
    bag(dualflow.tensor([[0, 1, 0]])).sum().backward()
    assert bag.weight.grad.numpy()[0].tolist() == [0.0, 0.0]
    assert bag.weight.grad.numpy()[1].tolist() == [1.0, 1.0]
    with pytest.raises(ShapeError, match="offsets has to be given"):
        bag(dualflow.tensor([1, 2]))
    with pytest.raises(ShapeError, match="offsets must be None"):
        bag(dualflow.tensor([[1, 2]]), dualflow.tensor([0]))
    with pytest.raises(ValueError, match="mode"):
        nn.EmbeddingBag(5, 2, mode="median")


def test_dropout2d_on_a_2d_input_warns_and_drops_elements() -> None:
    dualflow.random.seed(0)
    with pytest.warns(UserWarning, match="2-D input"):
        y = nn.Dropout2d(0.5)(dualflow.ones(64, 32)).numpy()
    assert set(np.unique(y).tolist()) == {0.0, 2.0}
    assert 0 < y[:, 0].sum() < 2 * 64  # one draw per (sample, channel): columns vary
    with pytest.warns(UserWarning, match="2-D input"):
        z = F.dropout2d(dualflow.ones(64, 32), 0.5).numpy()
    assert set(np.unique(z).tolist()) == {0.0, 2.0}
    with pytest.raises(ShapeError, match="at least 2 dims"):
        nn.Dropout2d(0.5)(dualflow.ones(4))


def test_functional_dropout2d_on_3d_input_drops_n_c_channels() -> None:
    dualflow.random.seed(3)
    with pytest.warns(UserWarning, match="3-D"):
        y = F.dropout2d(dualflow.ones(16, 8, 5), 0.5).numpy()
    assert (y.std(axis=2) == 0).all()  # each (N, C) row all kept or all dropped
    assert y[:, :, 0].mean(axis=1).std() > 0  # and the samples' masks differ
    y = F.dropout2d(dualflow.ones(2, 8, 3, 3), 0.5).numpy()
    assert (y.reshape(16, 9).std(axis=1) == 0).all()


def test_from_pretrained_copies_the_weight_and_freezes_it() -> None:
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    emb = nn.Embedding.from_pretrained(table, padding_idx=1)
    assert not emb.weight.requires_grad and emb.padding_idx == 1
    np.testing.assert_array_equal(emb.weight.numpy(), table)  # the padding row is kept, as PyTorch
    trainable = nn.Embedding.from_pretrained(dualflow.tensor(table), freeze=False)
    trainable(dualflow.tensor([3, 3])).sum().backward()
    assert trainable.weight.grad.numpy()[3].tolist() == [2.0, 2.0, 2.0]
    bag = nn.EmbeddingBag.from_pretrained(table, mode="max")
    assert bag(dualflow.tensor([[0, 2], [1, 3]])).tolist() == [[6.0, 7.0, 8.0], [9.0, 10.0, 11.0]]
    with pytest.raises(ValueError, match="2-dimensional"):
        nn.Embedding.from_pretrained(np.ones(3))


def test_functional_dropout1d_and_dropout3d_drop_channels_as_pytorch() -> None:
    dualflow.random.seed(4)
    y = F.dropout1d(dualflow.ones(16, 8, 5), 0.5).numpy()  # (N, C, L)
    assert (y.std(axis=2) == 0).all() and set(np.unique(y).tolist()) == {0.0, 2.0}
    y = F.dropout1d(dualflow.ones(32, 5), 0.5).numpy()  # unbatched (C, L): rows
    assert (y.std(axis=1) == 0).all() and 0 < y[:, 0].mean() < 2
    with pytest.raises(ShapeError, match="2-D or 3-D"):
        F.dropout1d(dualflow.ones(2, 2, 2, 2), 0.5)
    y = F.dropout3d(dualflow.ones(4, 8, 2, 2, 2), 0.5).numpy()
    assert (y.reshape(32, 8).std(axis=1) == 0).all()
    with pytest.warns(UserWarning, match="dim 0 as the channels"):
        y = F.dropout3d(dualflow.ones(32, 3), 0.5).numpy()  # PyTorch: unbatched, channels dim 0
    assert (y.std(axis=1) == 0).all() and 0 < y[:, 0].mean() < 2
    with pytest.warns(UserWarning, match="dim 0 as the channels"):
        y = nn.Dropout3d(0.5)(dualflow.ones(32, 2, 2, 2, 2, 2)).numpy()
    assert (y.reshape(32, -1).std(axis=1) == 0).all()
    x = dualflow.ones(2, 3)
    assert F.dropout1d(x, 0.5, training=False) is x and F.dropout3d(x, training=False) is x
