"""BatchNorm1d/2d and LayerNorm: PyTorch's running-statistics rules, modes, gradchecks."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import nn
from dualflow.errors import ShapeError
from dualflow.gradcheck import check_backward, check_double_backward
from tests.nn.functional import as_function

BN_KEYS = ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]


def bn_ref(x: np.ndarray, mean: np.ndarray, var: np.ndarray, w, b, eps: float) -> np.ndarray:
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * w.reshape(
        shape
    ) + b.reshape(shape)


def batch(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 2 + 3).astype(np.float32)


@pytest.mark.parametrize(("cls", "shape"), [(nn.BatchNorm1d, (8, 3)), (nn.BatchNorm1d, (8, 3, 5)),
                                            (nn.BatchNorm2d, (4, 3, 5, 6))])  # fmt: skip
def test_batchnorm_train_normalizes_and_updates_running_stats(cls, shape) -> None:
    bn = cls(3, momentum=0.2)
    assert list(bn.state_dict()) == BN_KEYS
    assert {k: v.shape for k, v in bn.state_dict().items()}["num_batches_tracked"] == ()
    assert bn.num_batches_tracked.dtype == np.int64
    with dualflow.no_grad():
        dualflow.ops.assign(bn.weight, [1.0, 2.0, 0.5])
        dualflow.ops.assign(bn.bias, [0.0, -1.0, 3.0])
    axes = (0,) + tuple(range(2, len(shape)))
    n = np.prod([shape[a] for a in axes])
    running_mean, running_var = np.zeros(3), np.ones(3)
    for step in range(3):
        x = batch(shape, step)
        y = bn(x)
        mean, var = x.mean(axis=axes), x.var(axis=axes)
        ref = bn_ref(x, mean, var, bn.weight.numpy(), bn.bias.numpy(), 1e-5)
        np.testing.assert_allclose(y.numpy(), ref, rtol=1e-4, atol=1e-4)
        # PyTorch: running stats use momentum and the *unbiased* batch variance.
        running_mean = 0.8 * running_mean + 0.2 * mean
        running_var = 0.8 * running_var + 0.2 * var * n / (n - 1)
        np.testing.assert_allclose(bn.running_mean.numpy(), running_mean, rtol=1e-5)
        np.testing.assert_allclose(bn.running_var.numpy(), running_var, rtol=1e-5)
        assert int(bn.num_batches_tracked) == step + 1


def test_batchnorm_eval_uses_running_stats_and_does_not_update() -> None:
    bn = nn.BatchNorm2d(3)
    bn(batch((4, 3, 2, 2), 0))
    before = {k: v.numpy().copy() for k, v in bn.state_dict().items()}
    x = batch((2, 3, 2, 2), 1)
    y = bn.eval()(x)
    ref = bn_ref(x, before["running_mean"], before["running_var"], before["weight"],
                 before["bias"], 1e-5)  # fmt: skip
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-5, atol=1e-5)
    for k, v in bn.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])


def test_model_eval_and_using_config_both_switch_batchnorm_to_inference() -> None:
    x = batch((4, 3, 2, 2), 2)
    bn = nn.BatchNorm2d(3)
    bn(x)
    stats = bn.running_mean.numpy().copy()
    with dualflow.using_config(train=False):
        y_config = bn(x).numpy()  # self.training is still True; the global flag wins
    assert bn.training and int(bn.num_batches_tracked) == 1
    np.testing.assert_array_equal(bn.running_mean.numpy(), stats)
    y_eval = bn.eval()(x).numpy()
    np.testing.assert_array_equal(y_config, y_eval)
    bn.train()
    y_train = bn(x).numpy()
    assert int(bn.num_batches_tracked) == 2
    assert not np.allclose(y_train, y_eval)


def test_batchnorm_cumulative_average_when_momentum_is_none() -> None:
    bn = nn.BatchNorm1d(2, momentum=None)
    xs = [batch((6, 2), s) for s in range(3)]
    for x in xs:
        bn(x)
    np.testing.assert_allclose(bn.running_mean.numpy(), np.mean([x.mean(0) for x in xs], 0),
                               rtol=1e-5)  # fmt: skip
    np.testing.assert_allclose(
        bn.running_var.numpy(), np.mean([x.var(0, ddof=1) for x in xs], 0), rtol=1e-5
    )


def test_batchnorm_without_affine_or_running_stats() -> None:
    bn = nn.BatchNorm1d(3, affine=False)
    assert list(bn.state_dict()) == BN_KEYS[2:] and bn.weight is None
    x = batch((5, 3))
    np.testing.assert_allclose(
        bn(x).numpy(), bn_ref(x, x.mean(0), x.var(0), np.ones(3), np.zeros(3), 1e-5), atol=1e-5
    )
    free = nn.BatchNorm1d(3, track_running_stats=False).eval()
    assert list(free.state_dict()) == ["weight", "bias"] and free.running_mean is None
    # without running statistics even eval mode normalizes with the batch's
    np.testing.assert_allclose(free(x).numpy(), bn(x).numpy(), atol=1e-6)


def test_batchnorm_input_checks_and_repr() -> None:
    with pytest.raises(ShapeError, match="4D"):
        nn.BatchNorm2d(3)(np.zeros((2, 3), np.float32))
    with pytest.raises(ShapeError, match="num_features=3"):
        nn.BatchNorm1d(3)(np.zeros((2, 4), np.float32))
    assert repr(nn.BatchNorm1d(4, momentum=None, affine=False)) == (
        "BatchNorm1d(4, eps=1e-05, momentum=None, affine=False, bias=False, "
        "track_running_stats=True)"
    )


def test_batchnorm_backward_reaches_weight_and_bias() -> None:
    bn = nn.BatchNorm2d(2)
    x = dualflow.tensor(batch((3, 2, 2, 2)), requires_grad=True)
    (bn(x) * dualflow.tensor(batch((3, 2, 2, 2), 5))).sum().backward()
    assert bn.weight.grad.shape == (2,) and bn.bias.grad.shape == (2,)
    assert x.grad.shape == x.shape
    assert bn.running_mean.grad is None


@pytest.mark.parametrize("train", [True, False])
def test_batchnorm_gradcheck_first_and_second_order(train: bool) -> None:
    bn = nn.BatchNorm2d(2, dtype="float64")
    bn(batch((4, 2, 3, 3), 9).astype(np.float64))  # non-trivial running statistics
    bn.train(train)
    f = as_function(bn, ["weight", "bias"])
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((3, 2, 2, 2)), 1 + rng.random(2), rng.standard_normal(2)]
    check_backward(f, inputs)
    check_double_backward(f, inputs)


def test_layernorm_names_forward_and_init() -> None:
    ln = nn.LayerNorm((3, 4))
    assert {k: v.shape for k, v in ln.state_dict().items()} == {"weight": (3, 4), "bias": (3, 4)}
    assert (ln.weight.numpy() == 1).all() and (ln.bias.numpy() == 0).all()
    with dualflow.no_grad():
        dualflow.ops.assign(ln.weight, batch((3, 4), 1))
        dualflow.ops.assign(ln.bias, batch((3, 4), 2))
    x = batch((2, 5, 3, 4), 3).astype(np.float64)
    mean = x.mean(axis=(2, 3), keepdims=True)
    var = x.var(axis=(2, 3), keepdims=True)
    ref = (x - mean) / np.sqrt(var + 1e-5) * ln.weight.numpy() + ln.bias.numpy()
    np.testing.assert_allclose(ln(x).numpy(), ref, rtol=1e-5, atol=1e-5)
    assert repr(ln) == "LayerNorm((3, 4), eps=1e-05, elementwise_affine=True, bias=True)"


def test_layernorm_without_affine() -> None:
    ln = nn.LayerNorm(4, elementwise_affine=False)
    assert ln.state_dict() == {}
    x = batch((2, 4))
    ref = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(ln(x).numpy(), ref, rtol=1e-5, atol=1e-5)
    assert list(nn.LayerNorm(4, bias=False).state_dict()) == ["weight"]
    assert list(nn.BatchNorm1d(4, bias=False).state_dict())[:2] == ["weight", "running_mean"]


def test_layernorm_gradcheck_first_and_second_order() -> None:
    ln = nn.LayerNorm(3, dtype="float64")
    f = as_function(ln, ["weight", "bias"])
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((2, 3)), 1 + rng.random(3), rng.standard_normal(3)]
    check_backward(f, inputs)
    check_double_backward(f, inputs)
