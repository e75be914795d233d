"""Averages over zero elements (issue 19): NaN as in numpy and PyTorch, never a bare
ZeroDivisionError; a RuntimeWarning names the op and the user's line, and debug mode raises a
NumericalError there. Eager and compiled agree."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import dualflow
from dualflow import nn, ops
from dualflow.errors import NumericalError
from dualflow.nn import functional as F

HERE = os.path.abspath(__file__)


def _empty_mean(x):
    return ops.mean(x)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_mean_of_an_empty_tensor_is_nan_with_a_warning_at_the_users_line(compiled: bool) -> None:
    fn = dualflow.compile(_empty_mean) if compiled else _empty_mean
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn(dualflow.tensor(np.zeros((0, 3), np.float32)))
    assert np.isnan(result.item())
    (warning,) = [w for w in caught if "averaging over 0 elements" in str(w.message)]
    assert str(warning.message).startswith("mean: averaging over 0 elements (x of shape (0, 3)")
    assert (warning.filename, warning.lineno) == (HERE, _empty_mean.__code__.co_firstlineno + 1)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_debug_mode_raises_numerical_error_naming_mean_and_the_line(compiled: bool) -> None:
    fn = dualflow.compile(_empty_mean, fallback="error") if compiled else _empty_mean
    dualflow.set_debug(True)
    try:
        with pytest.raises(NumericalError) as info:
            fn(dualflow.tensor(np.zeros(0, np.float32)))
    finally:
        dualflow.set_debug(False)
    message = str(info.value)
    assert message.startswith("mean: averaging over 0 elements"), message
    assert message.endswith(f"at {HERE}:{_empty_mean.__code__.co_firstlineno + 1}"), message


def test_var_without_degrees_of_freedom_and_tensor_mean_follow_pytorch() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert np.isnan(ops.var(dualflow.tensor([1.0]), ddof=1).item())  # torch.var([1.]): nan
        x = dualflow.tensor(np.zeros((0, 2), np.float32), requires_grad=True)
        y = x.mean()
        y.backward()
    assert np.isnan(y.item()) and x.grad.shape == (0, 2)


def _loss(x, t):
    return F.cross_entropy(x, t)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_cross_entropy_of_an_empty_batch_is_nan_as_pytorch(compiled: bool) -> None:
    fn = dualflow.compile(_loss) if compiled else _loss
    x = dualflow.tensor(np.zeros((0, 3), np.float32), requires_grad=True)
    t = dualflow.tensor(np.zeros(0, np.int64))
    for _ in range(2):  # the compiled second call runs the plan
        x.grad = None
        loss = fn(x, t)
        assert np.isnan(loss.item())  # was 0.0: an empty batch looked like a perfect one
        loss.backward()
        assert x.grad.shape == (0, 3)
    all_ignored = dualflow.tensor(np.array([-100, -100]))
    assert np.isnan(fn(dualflow.tensor(np.ones((2, 3), np.float32)), all_ignored).item())


def test_layer_norm_with_no_features_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match=r"LayerNorm: normalized_shape must be a positive"):
        nn.LayerNorm(0)
