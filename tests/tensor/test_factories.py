"""PyTorch-style factories (``dualflow.zeros(2, 3)``, ``arange``, ``linspace``, ``*_like``) and
samplers (``randn``, ``randint``, ``manual_seed``): signatures, dtypes, devices, compiled use.

Expected dtypes and values were read from torch 2.13 when these tests were written.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow.errors import DTypeError


def test_sizes_as_varargs_or_tuple_and_default_dtypes() -> None:
    assert dualflow.zeros(2, 3).shape == dualflow.zeros((2, 3)).shape == (2, 3)
    assert dualflow.ones([2]).dtype == np.float32 and dualflow.empty(0).shape == (0,)
    assert dualflow.full((2,), 7).dtype == np.int64
    assert dualflow.full((2,), True).dtype == np.bool_
    assert dualflow.full((1,), 0.5).dtype == np.float32
    assert dualflow.zeros(2, dtype="float64").dtype == np.float64
    x = dualflow.ones(2, 2, requires_grad=True)
    assert x.requires_grad and x.is_leaf
    with pytest.raises(DTypeError, match="floating"):
        dualflow.zeros(2, dtype="int64", requires_grad=True)
    with pytest.raises(ValueError, match="size"):
        dualflow.zeros(-1)


def test_like_factories_follow_the_input() -> None:
    base = dualflow.tensor(np.zeros((2, 3), np.float64))
    assert dualflow.zeros_like(base).dtype == np.float64
    assert dualflow.ones_like(base, dtype="float32").dtype == np.float32
    assert dualflow.full_like(base, 2.5).tolist() == [[2.5] * 3] * 2
    assert dualflow.empty_like(base).shape == (2, 3)
    assert dualflow.randn_like(base).dtype == np.float64
    assert dualflow.rand_like(base).shape == (2, 3)
    assert dualflow.randint_like(dualflow.zeros(4), 3).dtype == np.float32  # input's dtype


def test_arange_and_linspace_as_pytorch() -> None:
    assert dualflow.arange(3).dtype == np.int64
    assert dualflow.arange(0, 1, 0.25).dtype == np.float32
    assert dualflow.arange(1.0, 4).tolist() == [1.0, 2.0, 3.0]
    expected = [0.0, 0.1666666716337204, 0.3333333432674408, 0.5, 0.6666666269302368,
                0.8333333134651184, 1.0]  # fmt: skip
    np.testing.assert_allclose(dualflow.linspace(0, 1, 7).tolist(), expected, rtol=1e-7)
    assert dualflow.linspace(-1, 2.5, 4, dtype="float64").tolist() == [
        -1.0, 0.16666666666666674, 1.3333333333333333, 2.5,
    ]  # fmt: skip
    with pytest.raises(ValueError, match="step"):
        dualflow.arange(0, 1, 0)


def test_manual_seed_reproduces_and_randint_bounds() -> None:
    gen = dualflow.manual_seed(7)
    assert isinstance(gen, dualflow.random.Generator) and dualflow.initial_seed() == 7
    a = (
        dualflow.randn(3).tolist(),
        dualflow.rand(2, 2).tolist(),
        dualflow.randint(5, (4,)).tolist(),
    )
    dualflow.manual_seed(7)
    b = (
        dualflow.randn(3).tolist(),
        dualflow.rand(2, 2).tolist(),
        dualflow.randint(5, (4,)).tolist(),
    )
    assert a == b
    r = dualflow.randint(-2, 3, (2000,)).numpy()
    assert r.dtype == np.int64 and r.min() == -2 and r.max() == 2
    assert set(np.unique(r)) == {-2, -1, 0, 1, 2}
    with pytest.raises(ValueError, match="low < high"):
        dualflow.randint(3, 3, (1,))
    with pytest.raises(DTypeError, match="floating"):
        dualflow.randn(2, dtype="int64")


def test_factories_inside_a_compiled_function_are_nodes_not_constants() -> None:
    @dualflow.compile
    def f(x):
        noise = dualflow.randn(*x.shape)  # RNG state advances on every call, as eagerly
        return x + dualflow.ones_like(x) + 0 * noise, noise

    x = dualflow.tensor(np.zeros(3, np.float32))
    dualflow.manual_seed(0)
    first = [f(x)[1].tolist() for _ in range(3)]
    dualflow.manual_seed(0)
    eager = [dualflow.randn(3).tolist() for _ in range(3)]
    assert first == eager and first[0] != first[1]
    assert f(x)[0].tolist() == [1.0, 1.0, 1.0]
