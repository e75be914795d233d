"""``%``, ``//``, ``remainder``/``fmod``/``floor_divide`` (and in place), ``div(rounding_mode=)``
on Tensors: Python's meanings, numpy's promotion, typed errors, compiled equal to eager.
(Values and gradients against PyTorch: tests/compat/pyops_cases.py.)"""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow.errors import DTypeError


def test_operators_are_pythons_on_mixed_signs() -> None:
    values = [7, -7, 6, -1, 0]
    x = dualflow.tensor(values)
    assert (x % 3).tolist() == [v % 3 for v in values]
    assert (x % -3).tolist() == [v % -3 for v in values]
    assert (x // 2).tolist() == [v // 2 for v in values]
    assert (20 // (x + 10)).tolist() == [20 // (v + 10) for v in values]
    assert (13 % (x + 10)).tolist() == [13 % (v + 10) for v in values]
    f = x.float()
    assert (f % 2.5).tolist() == [v % 2.5 for v in values]
    assert (-7.5 // (f + 10)).tolist() == [-7.5 // (v + 10) for v in values]


def test_augmented_assignment_rebinds_as_plus_equals_does() -> None:
    x = dualflow.tensor([7, -7])
    alias = x
    x %= 4
    assert x.tolist() == [3, 1] and alias.tolist() == [7, -7]
    x //= 2
    assert x.tolist() == [1, 0]


def test_in_place_methods_write_the_tensor() -> None:
    x = dualflow.tensor([7.5, -7.5])
    assert x.remainder_(2.0) is x and x.tolist() == [1.5, 0.5]
    y = dualflow.tensor([7.5, -7.5])
    y.fmod_(2.0)
    assert y.tolist() == [1.5, -1.5]
    z = dualflow.tensor([7, -7])
    z.floor_divide_(dualflow.tensor([2, 2]))
    assert z.tolist() == [3, -4] and z.dtype == np.int64


def test_in_place_refuses_a_float_result_into_ints() -> None:
    x = dualflow.tensor([7, -7])
    with pytest.raises(DTypeError, match="remainder_: result type float64"):
        x.remainder_(2.5)
    assert x.tolist() == [7, -7]


def test_div_rounding_modes_and_the_error_naming_them() -> None:
    x = dualflow.tensor([7.0, -7.0, 0.5])
    assert x.div(2, rounding_mode="floor").tolist() == [3.0, -4.0, 0.0]
    assert x.div(2, rounding_mode="trunc").tolist() == [3.0, -3.0, 0.0]
    assert dualflow.tensor([7, -7]).div(2, rounding_mode="trunc").tolist() == [3, -3]
    assert dualflow.div(x, 2.0).tolist() == [3.5, -3.5, 0.25]
    with pytest.raises(ValueError, match=r"rounding_mode .* 'round'"):
        x.div(2, rounding_mode="round")


def test_trunc_division_gradient_is_zero_as_pytorchs() -> None:
    x = dualflow.tensor([7.0, -7.0], requires_grad=True)
    x.div(2.0, rounding_mode="trunc").sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]


def test_functions_exist_and_hints_are_gone() -> None:
    x = dualflow.tensor([-3.0, 3.0])
    assert dualflow.remainder(x, 2).tolist() == [1.0, 1.0]
    assert dualflow.fmod(x, 2).tolist() == [-1.0, 1.0]
    assert dualflow.floor_divide(x, 2).tolist() == [-2.0, 1.0]
    from dualflow.tensor.methods.hints import TENSOR_HINTS

    assert not {"remainder", "fmod", "floor_divide", "roll"} & set(TENSOR_HINTS)


def _index_arithmetic(idx, pos):
    return idx % 5, pos // 2, (pos.float() % 1.5) * 2


@pytest.mark.parametrize("dynamic", [False, True])
def test_index_arithmetic_compiled_equals_eager(dynamic: bool) -> None:
    fn = dualflow.compile(_index_arithmetic, dynamic=dynamic)
    for n in (6, 9, 6, 12):
        idx, pos = dualflow.arange(n) - 4, dualflow.arange(n) * 3 - 7
        for got, want in zip(fn(idx, pos), _index_arithmetic(idx, pos)):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert fn.stats().eager_fallbacks == 0
    if dynamic:
        assert fn.stats().traces == 2
