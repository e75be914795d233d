"""Behaviour of the neural-network functions beyond the op table: batch-norm running statistics,
cross-entropy reductions and stability, reproducible dropout, embedding gradients, typed errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import ops
from dualflow.autograd.eager import EAGER
from dualflow.errors import DTypeError, ShapeError
from dualflow.ops.dispatch import interpreting
from dualflow.tensor.random import Generator


def _t(values: Any, requires_grad: bool = False, dtype: Any = np.float64) -> dualflow.Tensor:
    return dualflow.tensor(np.asarray(values, dtype), requires_grad=requires_grad)


class _Recorder:
    """An interpreter that runs ops eagerly and remembers their names."""

    hooks = None  # not a tracing interpreter (dispatch.tracing())

    def __init__(self) -> None:
        self.names: list[str] = []

    def apply(self, op: Any, args: tuple, attrs: dict) -> Any:
        self.names.append(op.name)
        return EAGER.apply(op, args, attrs)


# ----- batch norm ----------------------------------------------------------------------------


def test_batch_norm_running_stats_follow_pytorch_rule_over_two_steps() -> None:
    rng = np.random.default_rng(0)
    xs = [rng.normal(2.0, 3.0, (4, 3, 2, 2)) for _ in range(2)]
    gamma, beta = _t(np.ones(3)), _t(np.zeros(3))
    running_mean, running_var = _t(np.zeros(3)), _t(np.ones(3))
    want_mean, want_var = np.zeros(3), np.ones(3)
    momentum = 0.2
    for x in xs:
        ops.batch_norm(_t(x), gamma, beta, running_mean, running_var, momentum=momentum)
        n = x.size // 3
        batch_mean = x.mean(axis=(0, 2, 3))
        unbiased = ((x - batch_mean[None, :, None, None]) ** 2).sum(axis=(0, 2, 3)) / (n - 1)
        want_mean = (1 - momentum) * want_mean + momentum * batch_mean
        want_var = (1 - momentum) * want_var + momentum * unbiased
    np.testing.assert_allclose(running_mean.numpy(), want_mean, rtol=1e-12)
    np.testing.assert_allclose(running_var.numpy(), want_var, rtol=1e-12)


def test_batch_norm_eval_uses_running_stats_and_reads_config() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(5, 3))
    gamma, beta = rng.uniform(0.5, 2, 3), rng.normal(size=3)
    mean, var = rng.normal(size=3), rng.uniform(0.5, 2, 3)
    want = gamma * (x - mean) / np.sqrt(var + 1e-5) + beta
    stats = (_t(mean), _t(var))
    got = ops.batch_norm(_t(x), _t(gamma), _t(beta), *stats, train=False)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    with dualflow.using_config(train=False):
        got = ops.batch_norm(_t(x), _t(gamma), _t(beta), *stats, train=None)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    np.testing.assert_array_equal(stats[0].numpy(), mean)  # eval never writes the statistics


def test_batch_norm_state_write_is_an_assign_and_not_differentiated() -> None:
    x = _t(np.random.default_rng(2).normal(size=(4, 2)), requires_grad=True)
    stats = (_t(np.zeros(2)), _t(np.ones(2)))
    recorder = _Recorder()
    with interpreting(recorder):
        y = ops.batch_norm(x, _t(np.ones(2)), _t(np.zeros(2)), *stats)
    assert recorder.names.count("assign") == 2
    assert not stats[0].requires_grad and stats[0].creator is None
    (y * y).sum().backward()
    assert x.grad.shape == x.shape


def test_batch_norm_bad_running_stats_change_nothing() -> None:
    mean, var = _t(np.zeros(3)), _t(np.ones(4))
    with pytest.raises(ShapeError, match="batch_norm: running_var"):
        ops.batch_norm(_t(np.ones((2, 3))), _t(np.ones(3)), _t(np.zeros(3)), mean, var)
    np.testing.assert_array_equal(mean.numpy(), np.zeros(3))


# ----- cross entropy -------------------------------------------------------------------------


def test_softmax_cross_entropy_ignore_label_and_reductions() -> None:
    x = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [3.0, -1.0, 0.5]])
    t = np.array([2, -1, 0])
    per_row = [np.log(np.exp(r).sum()) - r[c] for r, c in zip(x, t)]
    per_row[1] = 0.0
    sce = ops.softmax_cross_entropy
    np.testing.assert_allclose(sce(_t(x), t, reduce="no").numpy(), per_row, rtol=1e-12)
    np.testing.assert_allclose(sce(_t(x), t, reduce="none").numpy(), per_row, rtol=1e-12)
    np.testing.assert_allclose(sce(_t(x), t, reduce="sum").item(), sum(per_row), rtol=1e-12)
    np.testing.assert_allclose(sce(_t(x), t).item(), sum(per_row) / 2, rtol=1e-12)
    # nothing counted: the mean over no labels is NaN (PyTorch's cross_entropy), its gradient 0
    none_counted = _t(x, requires_grad=True)
    loss = sce(none_counted, np.array([-1, -1, -1]))
    assert np.isnan(loss.item())
    loss.backward()
    np.testing.assert_array_equal(none_counted.grad.numpy(), 0.0)
    xt = _t(x, requires_grad=True)
    sce(xt, t).backward()
    np.testing.assert_array_equal(xt.grad.numpy()[1], 0.0)  # ignored rows get no gradient
    with pytest.raises(ValueError, match="reduce"):
        sce(_t(x), t, reduce="avg")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cross_entropy_and_softmax_are_stable_for_huge_logits(dtype: Any) -> None:
    x = _t([[1e4, 0.0, -1e4], [0.0, 1e4, 1e4]], requires_grad=True, dtype=dtype)
    loss = ops.softmax_cross_entropy(x, np.array([1, 2]), reduce="no")
    np.testing.assert_allclose(loss.numpy(), [1e4, np.log(2)], rtol=1e-6)
    loss.sum().backward()
    assert np.isfinite(x.grad.numpy()).all()
    np.testing.assert_allclose(x.grad.numpy(), [[1, -1, 0], [0, 0.5, -0.5]], atol=1e-6)
    np.testing.assert_allclose(ops.softmax(x).numpy()[1], [0, 0.5, 0.5], atol=1e-7)
    assert np.isfinite(ops.log_softmax(x).numpy()).all()
    t = np.array([[1, 0, -1]])
    sigmoid = ops.sigmoid_cross_entropy(_t([[1e4, 1e4, -1e4]], dtype=dtype), t, reduce="no")
    np.testing.assert_allclose(sigmoid.numpy(), [[0.0, 1e4, 0.0]])


# ----- dropout and the generator ---------------------------------------------------------------


def _mask(generator: Generator | None = None, ratio: float = 0.5) -> np.ndarray:
    return ops.dropout(_t(np.ones((8, 16))), ratio, train=True, generator=generator).numpy()


def test_dropout_same_seed_same_masks_different_seed_different_masks() -> None:
    a, b, c = Generator(7), Generator(7), Generator(8)
    first, second = _mask(a), _mask(a)
    np.testing.assert_array_equal(first, _mask(b))
    np.testing.assert_array_equal(second, _mask(b))
    assert not np.array_equal(first, second)  # the generator advanced
    assert not np.array_equal(first, _mask(c))
    dualflow.random.seed(3)
    default_masks = [_mask(), _mask()]
    dualflow.random.seed(3)
    np.testing.assert_array_equal(default_masks[0], _mask())
    np.testing.assert_array_equal(default_masks[1], _mask())


def test_dropout_mask_values_and_rate() -> None:
    mask = ops.dropout(_t(np.ones(20000)), 0.3, train=True, generator=Generator(1)).numpy()
    assert set(np.unique(mask)) == {0.0, 1 / 0.7}
    assert abs((mask == 0).mean() - 0.3) < 0.02
    np.testing.assert_array_equal(_mask(Generator(1), ratio=1.0), 0.0)


def test_dropout_eval_is_identity() -> None:
    x = _t(np.ones((3, 3)))
    assert ops.dropout(x, 0.5, train=False) is x
    with dualflow.using_config(train=False):
        assert ops.dropout(x, 0.5) is x
    with pytest.raises(ValueError, match="dropout: ratio"):
        ops.dropout(x, 1.5)


def test_dropout_gradient_is_the_mask() -> None:
    x = _t(np.random.default_rng(3).normal(size=(6, 5)), requires_grad=True)
    y = ops.dropout(x, 0.5, train=True, generator=Generator(11))
    y.sum().backward()
    mask = ops.dropout(_t(np.ones((6, 5))), 0.5, train=True, generator=Generator(11))
    np.testing.assert_array_equal(x.grad.numpy(), mask.numpy())
    np.testing.assert_allclose(y.numpy(), x.numpy() * mask.numpy(), rtol=1e-12)


def test_drawing_a_key_advances_the_state_through_assign() -> None:
    generator = Generator(5)
    recorder = _Recorder()
    with interpreting(recorder):
        key = generator.next_key()
    assert "assign" in recorder.names
    assert key.tolist() == [5, 1] and generator.state.tolist() == [5, 1]
    generator.next_key()
    assert key.tolist() == [5, 1]  # keys are fresh tensors, not views of the state
    assert generator.manual_seed(9).state.tolist() == [9, 0]


def test_random_factories() -> None:
    z = dualflow.random.normal((20000,), 1.0, 2.0, generator=Generator(0))
    assert z.dtype == np.float32
    assert abs(z.numpy().mean() - 1.0) < 0.05 and abs(z.numpy().std() - 2.0) < 0.05
    u = dualflow.random.uniform((20000,), dtype="float64", generator=Generator(0))
    assert u.numpy().min() >= 0.0 and u.numpy().max() < 1.0
    assert abs(u.numpy().mean() - 0.5) < 0.01
    assert dualflow.random.uniform((2,), requires_grad=True).requires_grad


# ----- embedding ------------------------------------------------------------------------------


def test_embedding_repeated_ids_accumulate_gradients() -> None:
    weight = _t(np.arange(12.0).reshape(4, 3), requires_grad=True)
    ids = np.array([[1, 1], [3, 1]])
    y = ops.embedding(ids, weight)
    np.testing.assert_array_equal(y.numpy(), weight.numpy()[ids])
    y.sum().backward()
    np.testing.assert_array_equal(weight.grad.numpy()[:, 0], [0.0, 3.0, 0.0, 1.0])


# ----- typed errors --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: ops.softmax(np.array([1, 2])), DTypeError, "softmax: input must be floating"),
        (lambda: ops.log_softmax(np.ones(3), axis=2), ShapeError, "log_softmax: axis 2"),
        (
            lambda: ops.softmax_cross_entropy(np.ones((2, 3)), np.array([0.0, 1.0])),
            DTypeError,
            "softmax_cross_entropy: labels must be integers",
        ),
        (
            lambda: ops.softmax_cross_entropy(np.ones((2, 3)), np.array([0, 3])),
            ShapeError,
            r"softmax_cross_entropy: labels must lie in \[0, 3\) \(or -1 to ignore\), got 3",
        ),
        (
            lambda: ops.softmax_cross_entropy(np.ones((2, 3)), np.array([0, 1, 2])),
            ShapeError,
            "softmax_cross_entropy: labels of shape",
        ),
        (
            lambda: ops.sigmoid_cross_entropy(np.ones(2), np.ones(2, bool)),
            DTypeError,
            "sigmoid_cross_entropy: t",
        ),
        (lambda: ops.one_hot(np.array([4]), 4), ShapeError, "one_hot: labels must lie"),
        (
            lambda: ops.embedding(np.array([0, 5]), np.ones((5, 2))),
            ShapeError,
            r"embedding: ids must lie in \[0, 5\), got 5",
        ),
        (lambda: ops.embedding(np.array([-1]), np.ones((5, 2))), ShapeError, "got -1"),
        (lambda: ops.embedding(np.array([0.0]), np.ones((5, 2))), DTypeError, "embedding: ids"),
        (
            lambda: ops.batch_norm(np.ones((2, 3)), np.ones(4), np.zeros(3)),
            ShapeError,
            r"batch_norm: gamma must have shape \(3,\)",
        ),
        (
            lambda: ops.batch_norm(np.ones((1, 3)), np.ones(3), np.zeros(3)),
            ShapeError,
            "batch_norm: training needs more than one value per channel",
        ),
        (
            lambda: ops.layer_norm(np.ones((2, 3)), np.ones(2), np.zeros(2)),
            ShapeError,
            "layer_norm: gamma of shape",
        ),
        (
            lambda: ops.mean_squared_error(np.ones(2), np.ones(3)),
            ShapeError,
            "mean_squared_error",
        ),
        (
            lambda: ops.dropout_mask(np.array([1, 2]), (2,)),
            DTypeError,
            "dropout_mask: key must be a uint64",
        ),
        (lambda: ops.dropout(np.array([1, 2]), train=True), DTypeError, "dropout: x"),
    ],
)
def test_typed_errors_name_the_op(call: Any, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call()
