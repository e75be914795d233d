"""The once silently different Tensor behaviours now mean what they mean in PyTorch; PyTorch names
dualflow lacks say what to use; dtype mismatches in layers raise typed errors at the user's line.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import function_names, functions, nn, ops
from dualflow.errors import DTypeError
from dualflow.nn import functional as F


def test_transpose_swaps_two_dims_and_permute_reorders_all() -> None:
    x = dualflow.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert x.transpose(0, 1).tolist() == [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]
    y = dualflow.ops.zeros((2, 3, 4))
    assert y.transpose(0, 2).shape == (4, 3, 2) and y.permute(2, 0, 1).shape == (4, 2, 3)
    assert ops.transpose(y, (1, 2, 0)).shape == (3, 4, 2)  # the numpy-style primitive stays


def test_max_with_dim_returns_values_and_indices_with_gradient_to_the_index() -> None:
    x = dualflow.tensor([[3.0, 3.0, 1.0], [0.0, 2.0, 2.0]], requires_grad=True)
    result = x.max(1)
    assert result.values.tolist() == [3.0, 2.0] and result.indices.tolist() == [0, 1]
    values, _indices = result  # unpacks at any batch size
    values.sum().backward()  # PyTorch: the gradient goes to the returned (first) index
    assert x.grad.tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    x.grad = None
    x.max().backward()  # the full reduction shares ties, as PyTorch's
    assert x.grad.tolist() == [[0.5, 0.5, 0.0], [0.0, 0.0, 0.0]]
    assert x.max().shape == ()


def test_size_is_the_shape_and_numel_the_count() -> None:
    x = dualflow.ops.zeros((2, 3))
    assert x.size() == (2, 3) and x.size(0) == 2 and x.size(-1) == 3 and x.numel() == 6
    assert isinstance(x.size(), tuple) and x.size().numel() == 6
    assert repr(x.size()) == "dualflow.Size([2, 3])"
    with pytest.raises(dualflow.errors.ShapeError, match="dimension out of range"):
        x.size(2)


def test_leaky_relu_defaults_to_pytorchs_slope_everywhere() -> None:
    x = dualflow.tensor([-100.0])
    assert ops.leaky_relu(x).tolist() == F.leaky_relu(x).tolist() == [-1.0]
    assert nn.LeakyReLU()(x).tolist() == [-1.0]


def test_float64_input_to_a_float32_layer_raises_naming_op_dtypes_and_line() -> None:
    layer = nn.Linear(3, 2)
    x = dualflow.tensor(np.ones((1, 3)))  # float64, as torch.from_numpy would give
    with pytest.raises(DTypeError) as info:
        layer(x)
    text = str(info.value)
    assert "linear" in text and "float64" in text and "float32" in text
    assert "test_methods.py" in text  # the user's line
    with pytest.raises(DTypeError, match="conv2d: input is float64 but weight is float32"):
        nn.Conv2d(3, 2, 1)(np.ones((1, 3, 2, 2)))
    with pytest.raises(DTypeError, match="matmul"):
        x @ layer.weight.t()
    assert layer(x.float()).dtype == np.float32  # cast explicitly, as in PyTorch


def test_sigmoid_cross_entropy_accepts_float_targets_and_never_suggests_int64() -> None:
    x = dualflow.tensor([[0.0, 2.0]])
    soft = ops.sigmoid_cross_entropy(x, dualflow.tensor([[0.25, 0.75]]))
    want = np.mean(np.log1p(np.exp([0.0, 2.0])) - np.array([0.0, 2.0]) * [0.25, 0.75])
    assert soft.item() == pytest.approx(want, rel=1e-6)
    with pytest.raises(DTypeError) as info:
        ops.sigmoid_cross_entropy(x, dualflow.tensor([[True, False]]))
    assert "int64" not in str(info.value) and "probabilities" in str(info.value)


def test_pytorch_names_dualflow_lacks_say_what_to_use() -> None:
    x = dualflow.tensor([1.0, 2.0])
    with pytest.raises(AttributeError, match=r"median.*PyTorch's Tensor\.median.*x\.sort"):
        _ = x.median
    with pytest.raises(AttributeError, match=r"has no attribute 'no_such_method'$"):
        _ = x.no_such_method
    with pytest.raises(AttributeError, match=r"F\.grid_sample.*interpolate"):
        _ = F.grid_sample
    assert not hasattr(x, "register_hook") and hasattr(x, "register_hook") is False


def test_prod_gradient_with_two_zeros_is_zero_and_with_one_is_the_others_product() -> None:
    x = dualflow.tensor([[2.0, 0.0, 3.0], [0.0, 0.0, 5.0]], requires_grad=True)
    x.prod(1).sum().backward()
    assert x.grad.tolist() == [[0.0, 6.0, 0.0], [0.0, 0.0, 0.0]]


def test_reductions_take_dim_keepdim_and_numpy_aliases() -> None:
    x = dualflow.tensor(np.arange(6.0).reshape(2, 3))
    assert x.sum(dim=1, keepdim=True).shape == (2, 1)
    assert x.sum(axis=1, keepdims=True).shape == (2, 1)  # numpy's names, accepted as PyTorch does
    assert x.std().item() == pytest.approx(np.std(np.arange(6.0), ddof=1))
    with pytest.raises(DTypeError, match="mean: input dtype must be floating point"):
        dualflow.tensor([1, 2]).mean()


def test_device_attributes_as_pytorch() -> None:
    x = dualflow.tensor([1.0])
    assert x.device.type == "cpu" and not x.is_cuda and x.cpu() is x and x.to("cpu") is x


def test_dtype_names_at_the_top_level() -> None:
    x = dualflow.tensor([1.5])
    assert x.to(dualflow.float64).dtype == np.float64 and x.to(dualflow.long).tolist() == [1]
    assert dualflow.is_floating_point(x) and not dualflow.is_floating_point(x.long())


def test_torch_function_forms_are_the_methods() -> None:
    names = function_names.FUNCTIONS + function_names.INDEX_FUNCTIONS
    assert all(callable(getattr(dualflow, n)) for n in names)  # each list names a definition
    assert all(callable(getattr(functions, n)) for n in function_names.FUNCTIONS)
    x = dualflow.tensor([[1.0, -2.0], [3.0, 0.5]])
    assert dualflow.sum(x, dim=0).tolist() == x.sum(0).tolist()
    assert dualflow.clamp(x, min=0).tolist() == [[1.0, 0.0], [3.0, 0.5]]
    assert dualflow.where(x > 0, x, 0.0).tolist() == [[1.0, 0.0], [3.0, 0.5]]
    assert dualflow.cat([x, x]).shape == (4, 2) and dualflow.concat([x, x], 1).shape == (2, 4)
    array = np.zeros(2, np.float32)
    shared = dualflow.from_numpy(array)
    array[1] = 4.0
    assert shared.tolist() == [0.0, 4.0] and not shared.requires_grad
    with pytest.raises(NotImplementedError, match="where"):
        dualflow.where(x > 0)
