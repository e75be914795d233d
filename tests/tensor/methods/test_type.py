"""``Tensor.type``: PyTorch's legacy type name without an argument, a cast with one."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow.errors import DTypeError


@pytest.mark.parametrize(
    ("dtype", "name"),
    [
        ("float32", "dualflow.FloatTensor"),
        ("float64", "dualflow.DoubleTensor"),
        ("float16", "dualflow.HalfTensor"),
        ("int64", "dualflow.LongTensor"),
        ("int32", "dualflow.IntTensor"),
        ("uint8", "dualflow.ByteTensor"),
        ("bool", "dualflow.BoolTensor"),
    ],
)
def test_type_without_argument_names_the_tensor_type(dtype: str, name: str) -> None:
    assert dualflow.zeros(2, dtype=dtype).type() == name


def test_type_casts_like_to_and_keeps_a_tensor_of_that_dtype() -> None:
    x = dualflow.tensor([1.7, -2.5])
    assert x.type(dualflow.int64).tolist() == [1, -2]  # word_language_model's data.py
    assert x.type("float64").dtype == np.float64
    assert x.type(dualflow.float32) is x  # as PyTorch: no copy when the type already matches
    assert x.type("torch.LongTensor").dtype == np.int64
    assert x.type("dualflow.DoubleTensor").dtype == np.float64


def test_type_of_a_grad_tensor_is_differentiable() -> None:
    x = dualflow.tensor([1.0, 2.0], requires_grad=True)
    x.type(dualflow.float64).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0] and x.grad.dtype == np.float32


@pytest.mark.parametrize("name", ["torch.cuda.FloatTensor", "numpy.FloatTensor", "FooTensor"])
def test_unknown_type_names_raise_naming_the_name(name: str) -> None:
    with pytest.raises(DTypeError, match=f"type\\('{name}'\\): not a tensor type name"):
        dualflow.tensor([1.0]).type(name)


def test_type_compiled_equals_eager() -> None:
    def f(x):
        return x.type(dualflow.int64) * 2

    compiled = dualflow.compile(f)
    for values in ([1.5, 2.5], [3.5, -4.5], [0.5, 9.5]):
        x = dualflow.tensor(values)
        assert compiled(x).tolist() == f(x).tolist()
    assert compiled.stats().plan_runs == 2
