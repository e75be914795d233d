"""The Tensor API: attributes, tensor() dtype defaults and copying, operators (incl. reflected ones
with Python scalars and numpy arrays), comparisons, conversions and repr.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import Device, Tensor


# ----- attributes ----------------------------------------------------------------------------
def test_attributes() -> None:
    t = dualflow.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert isinstance(t.array, np.ndarray)
    assert (
        t.shape == (2, 3) and t.ndim == 2 and t.numel() == 6 and t.size() == (2, 3) and len(t) == 2
    )
    assert t.dtype == np.float32
    assert t.device == Device("cpu") and str(t.device) == "cpu"
    assert t.grad is None and t.requires_grad is False and t.is_leaf and t.creator is None
    np.testing.assert_array_equal(t.numpy(), [[1, 2, 3], [4, 5, 6]])
    assert t.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


def test_array_is_shared_not_copied() -> None:
    t = dualflow.tensor([1.0, 2.0])
    assert t.array is t.array
    assert np.shares_memory(t.numpy(), t.array)


def test_item_and_python_conversions() -> None:
    assert dualflow.tensor(2.5).item() == 2.5 and isinstance(dualflow.tensor(2.5).item(), float)
    assert dualflow.tensor([7]).item() == 7 and isinstance(dualflow.tensor([7]).item(), int)
    assert float(dualflow.tensor([[1.5]])) == 1.5
    assert int(dualflow.tensor(3)) == 3
    with pytest.raises(ValueError, match=r"one element.*\(2,\)"):
        dualflow.tensor([1.0, 2.0]).item()
    with pytest.raises(TypeError):
        len(dualflow.tensor(1.0))


def test_bool_of_one_element() -> None:
    assert bool(dualflow.tensor([1.0])) is True
    assert bool(dualflow.tensor(0.0)) is False
    with pytest.raises(ValueError):
        bool(dualflow.tensor([1.0, 2.0]))


def test_index_dunder_only_for_integers() -> None:
    assert [10, 20, 30][dualflow.tensor(1)] == 20
    with pytest.raises(TypeError):
        [10, 20][dualflow.tensor(1.0)]


def test_numpy_protocol() -> None:
    t = dualflow.tensor([1.0, 2.0])
    a = np.asarray(t)
    assert isinstance(a, np.ndarray) and a.dtype == np.float32
    assert np.asarray(t, dtype=np.float64).dtype == np.float64


# ----- tensor(): dtypes, devices, copies -------------------------------------------------------
@pytest.mark.parametrize(
    "data, dtype",
    [
        (1.5, np.float32),
        ([1.0, 2.0], np.float32),
        ([[1.0], [2.0]], np.float32),
        (3, np.int64),
        ([1, 2], np.int64),
        ([True, False], np.bool_),
        ([1, 2.5], np.float32),
        (np.ones(2, np.float64), np.float64),
        (np.ones(2, np.float16), np.float16),
        (np.arange(3, dtype=np.int32), np.int32),
        (np.float64(1.0), np.float64),
    ],
    ids=repr,
)
def test_tensor_default_dtypes(data: Any, dtype: Any) -> None:
    assert dualflow.tensor(data).dtype == dtype


def test_tensor_explicit_dtype_and_device() -> None:
    t = dualflow.tensor([1, 2], dtype="float64", device="cpu", requires_grad=True)
    assert t.dtype == np.float64 and t.device == Device("cpu") and t.requires_grad
    assert dualflow.tensor([1.5, 2.5], dtype=np.int32).tolist() == [1, 2]


def test_tensor_copies_its_input() -> None:
    source = np.array([1.0, 2.0, 3.0])
    t = dualflow.tensor(source)
    source[0] = 100.0
    assert t.tolist() == [1.0, 2.0, 3.0]
    u = dualflow.tensor(t)
    t.array[1] = -1.0
    assert u.tolist() == [1.0, 2.0, 3.0]
    assert u is not t and not u.requires_grad


def test_as_tensor_does_not_copy() -> None:
    a = np.ones(3)
    t = dualflow.as_tensor(a)
    assert t.array is a
    assert dualflow.as_tensor(t) is t


def test_requires_grad_only_for_floats() -> None:
    assert dualflow.tensor([1.0], requires_grad=True).requires_grad
    with pytest.raises(dualflow.errors.DTypeError):
        dualflow.tensor([1, 2], requires_grad=True)
    t = dualflow.tensor([1.0])
    assert t.requires_grad_() is t and t.requires_grad


def test_detach_shares_data_and_cuts_the_graph() -> None:
    x = dualflow.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    d = y.detach()
    assert d.array is y.array and not d.requires_grad and d.creator is None


# ----- operators -------------------------------------------------------------------------------
BINARY = [
    ("add", operator.add),
    ("sub", operator.sub),
    ("mul", operator.mul),
    ("truediv", operator.truediv),
    ("pow", operator.pow),
]
T_VALUES = np.array([0.5, 1.0, 2.0], np.float32)


@pytest.mark.parametrize("name, fn", BINARY, ids=[b[0] for b in BINARY])
@pytest.mark.parametrize("other", [2.0, 3, np.float64(2.0), np.array([1.5, 2.0, 4.0])], ids=repr)
def test_binary_operators_match_numpy_both_ways(name: str, fn: Any, other: Any) -> None:
    t = dualflow.tensor(T_VALUES)
    for got, want in ((fn(t, other), fn(T_VALUES, other)), (fn(other, t), fn(other, T_VALUES))):
        assert isinstance(got, Tensor), f"{name} returned {type(got)}"
        assert got.dtype == np.asarray(want).dtype, f"{name}: {got.dtype} != {want.dtype}"
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


def test_numpy_array_on_the_left_returns_a_tensor() -> None:
    t = dualflow.tensor([1.0, 2.0, 3.0], requires_grad=True)
    for result in (np.ones(3) * t, np.ones(3) + t, np.ones(3) - t, np.ones(3) / t):
        assert isinstance(result, Tensor) and result.requires_grad
    (np.full(3, 2.0) * t).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), [2.0, 2.0, 2.0])


def test_float32_stays_float32_under_python_scalars() -> None:
    t = dualflow.tensor([1.0, 2.0])
    for result in (t * 2.0, 2.0 * t, t + 1, t - 0.5, 1 - t, t / 3, 3 / t, t**2, 2**t, -t):
        assert result.dtype == np.float32


def test_unary_operators() -> None:
    t = dualflow.tensor([-1.5, 2.0])
    assert (-t).tolist() == [1.5, -2.0]
    assert (+t) is t
    assert abs(t).tolist() == [1.5, 2.0]


def test_matmul_operator_both_ways() -> None:
    a = dualflow.tensor([[1.0, 2.0], [3.0, 4.0]])
    b = np.array([[0.5], [1.0]], np.float32)
    assert (a @ b).tolist() == [[2.5], [5.5]]
    assert isinstance(b.T @ a, Tensor)
    np.testing.assert_allclose((b.T @ a).numpy(), b.T @ a.numpy())


@pytest.mark.parametrize(
    "fn",
    [operator.gt, operator.ge, operator.lt, operator.le, operator.eq, operator.ne],
    ids=lambda f: f.__name__,
)
def test_comparisons_give_bool_tensors(fn: Any) -> None:
    t = dualflow.tensor([1.0, 2.0, 3.0])
    other = np.array([2.0, 2.0, 2.0])
    got = fn(t, other)
    assert isinstance(got, Tensor) and got.dtype == np.bool_ and not got.requires_grad
    np.testing.assert_array_equal(got.numpy(), fn(t.numpy(), other))
    np.testing.assert_array_equal(fn(t, 2).numpy(), fn(t.numpy(), 2))


def test_tensors_hash_by_identity() -> None:
    a, b = dualflow.tensor([1.0]), dualflow.tensor([1.0])
    assert len({a: 1, b: 2}) == 2


def test_method_forms() -> None:
    x = np.arange(6.0).reshape(2, 3)
    t = dualflow.tensor(x)
    np.testing.assert_allclose(t.sum().item(), x.sum())
    np.testing.assert_allclose(t.mean(axis=0).numpy(), x.mean(axis=0))
    values, indices = t.max(1, keepdim=True)  # PyTorch: (values, indices) along a dim
    np.testing.assert_allclose(values.numpy(), x.max(1, keepdims=True))
    np.testing.assert_array_equal(indices.numpy(), x.argmax(1)[:, None])
    assert t.reshape(3, 2).shape == (3, 2) and t.reshape((6,)).shape == (6,)
    assert t.T.shape == (3, 2) and t.transpose(1, 0).shape == (3, 2)
    assert t.astype("int32").dtype == np.int32
    np.testing.assert_allclose(t.tanh().numpy(), np.tanh(x), rtol=1e-12)


# ----- repr ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "t, text",
    [
        (dualflow.tensor(3.5), "tensor(3.5, dtype=float32)"),
        (dualflow.tensor([1, 2]), "tensor([1, 2], dtype=int64)"),
        (
            dualflow.tensor([1.0], requires_grad=True),
            "tensor([1.], dtype=float32, requires_grad=True)",
        ),
        (dualflow.tensor([[1.0, 2.0]]), "tensor([[1., 2.]], dtype=float32)"),
    ],
)
def test_repr(t: Tensor, text: str) -> None:
    assert repr(t) == text
