"""``roll`` and ``tensor_split``: numpy's ``roll``/``array_split`` meanings eagerly, compiled and
with symbolic sizes (``compile(dynamic=True)``), gradients, and errors naming the call.
(Values and gradients against PyTorch: tests/compat/pyops_cases.py.)"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dualflow
from dualflow.errors import ShapeError


def _roll_program(x):
    return x.roll(2, 0) * 2, x.roll((-1, 3), (0, 1)), x.roll(-5)


def _split_program(x):
    return x.tensor_split(3) + x.tensor_split([1, -1], dim=1)


def _numpy_split(a):
    return tuple(np.array_split(a, 3)) + tuple(np.split(a, [1, a.shape[1] - 1], axis=1))


def _check(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w)


@pytest.mark.parametrize("dynamic", [False, True])
def test_roll_compiled_equals_numpy_for_every_size(dynamic: bool) -> None:
    fn = dualflow.compile(_roll_program, dynamic=dynamic)
    for rows in (3, 5, 4, 7):
        a = np.arange(rows * 4.0).reshape(rows, 4)
        want = (np.roll(a, 2, 0) * 2, np.roll(a, (-1, 3), (0, 1)), np.roll(a, -5))
        _check(fn(dualflow.tensor(a)), want)
    assert fn.stats().eager_fallbacks == 0
    # shifts within one turn slice by ints: one symbolic template (and its witness) serves all
    assert fn.stats().traces == (2 if dynamic else 4)


@pytest.mark.parametrize("dynamic", [False, True])
def test_tensor_split_compiled_equals_numpy_for_every_size(dynamic: bool) -> None:
    fn = dualflow.compile(_split_program, dynamic=dynamic)
    for rows in (4, 7, 5, 9):
        a = np.arange(rows * 3.0).reshape(rows, 3)
        _check(fn(dualflow.tensor(a)), _numpy_split(a))
    assert fn.stats().eager_fallbacks == 0


def test_tensor_split_by_indices_serves_every_size_from_one_template() -> None:
    fn = dualflow.compile(lambda x: x.tensor_split([1, -2]), dynamic=True)
    for rows in (4, 7, 5, 9):
        a = np.arange(rows * 2.0).reshape(rows, 2)
        _check(fn(dualflow.tensor(a)), np.split(a, [1, rows - 2]))
    assert fn.stats().traces == 2 and fn.stats().eager_fallbacks == 0


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(0, 9),
    shift=st.integers(-20, 20),
    cuts=st.lists(st.integers(-12, 12), max_size=4),
)
def test_random_shifts_and_cuts_match_python_slices(n: int, shift: int, cuts: list[int]) -> None:
    a = np.arange(float(n))
    x = dualflow.tensor(a)
    np.testing.assert_array_equal(x.roll(shift).numpy(), np.roll(a, shift))
    _check(x.tensor_split(cuts), [a[slice(s, e)] for s, e in zip([0, *cuts], [*cuts, None])])


def test_gradients_flow_back_to_the_rolled_and_split_places() -> None:
    x = dualflow.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    weights = dualflow.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    (x.roll(1, 1) * weights).sum().backward()
    assert x.grad.tolist() == [[2.0, 3.0, 1.0], [5.0, 6.0, 4.0]]
    x.grad = None
    first, second = x.tensor_split([2], dim=1)
    (first.sum() * 2 + second.sum() * 3).backward()
    assert x.grad.tolist() == [[2.0, 2.0, 3.0], [2.0, 2.0, 3.0]]


def test_bad_arguments_raise_typed_errors_naming_the_call() -> None:
    x = dualflow.tensor(np.zeros((2, 3)))
    with pytest.raises(ShapeError, match="roll: shifts and dims must align"):
        x.roll((1, 2), 0)
    with pytest.raises(ShapeError, match="roll: without dims"):
        x.roll((1, 2))
    with pytest.raises(ShapeError, match="tensor_split: number of sections"):
        x.tensor_split(0)
    with pytest.raises(TypeError, match="exactly one"):
        x.tensor_split(2, indices=[1])
    with pytest.raises(TypeError, match="must be an int"):
        x.roll(1.5)


def test_functions_and_tensor_arguments() -> None:
    x = dualflow.arange(5)
    assert dualflow.roll(x, 1).tolist() == [4, 0, 1, 2, 3]
    pieces = dualflow.tensor_split(x, dualflow.tensor([1, 3]))
    assert [p.tolist() for p in pieces] == [[0], [1, 2], [3, 4]]
    assert [p.tolist() for p in x.tensor_split(dualflow.tensor(2))] == [[0, 1, 2], [3, 4]]
