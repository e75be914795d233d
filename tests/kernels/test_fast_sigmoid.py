"""``fast_sigmoid``: eager sigmoid's one float32 loop gives the bits of the op's expression (and
eager tanh takes ``numpy_tanh``'s loop directly).

The expression ``0.5 * tanh(0.5 * x) + 0.5`` rendered for numpy (four calls) is the reference, on a
strided sweep of all 2^32 float32 bit patterns and on special values; other dtypes, layouts and
0-d operands still run the expression; compiled sigmoid equals eager's.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import ops
from dualflow.kernels.expr.expression import compile_numpy
from dualflow.kernels.fast_math import float32_loops
from dualflow.kernels.fast_math.fast_sigmoid import numpy_sigmoid
from dualflow.kernels.fast_math.fast_tanh import numpy_tanh
from dualflow.ops.registry import OPS

EXPRESSION = compile_numpy(OPS["sigmoid"].expr, ("x",), ())  # the numpy calls, no loop


def _bits(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, np.float32).view(np.int32)


def test_the_loop_gives_the_expressions_bits_over_float32() -> None:
    sweep = np.arange(0, 1 << 32, 1021, dtype=np.uint64).astype(np.uint32).view(np.float32)
    special = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 1e-38, 3.4e38, -3.4e38, 9.0],
        np.float32,
    )
    for x in (sweep, special):
        with np.errstate(all="ignore"):
            expected = EXPRESSION(np, x)
        np.testing.assert_array_equal(_bits(numpy_sigmoid(x)), _bits(expected))


def test_big_arrays_split_across_threads_give_the_same_bits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(float32_loops, "MIN_PART", 1 << 16)  # two parts and a bit
    x = np.random.default_rng(0).normal(scale=8.0, size=2 * float32_loops.MIN_PART + 3)
    x = x.astype(np.float32).reshape(-1, 1)
    np.testing.assert_array_equal(_bits(numpy_sigmoid(x)), _bits(EXPRESSION(np, x)))


@pytest.mark.parametrize(
    "x",
    [
        np.float32(0.25) * np.ones((), np.float32),  # 0-d: a scalar, as numpy's ufuncs give
        np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4).T,  # not C-ordered
        np.linspace(-3, 3, 12).reshape(3, 4),  # float64
        np.arange(-3, 3, dtype=np.int16),  # numpy's float32 loop
    ],
)
def test_eager_sigmoid_equals_the_expression_for_any_operand(x: np.ndarray) -> None:
    got = OPS["sigmoid"].forward(np, x)
    expected = EXPRESSION(np, x)
    assert type(got) is type(expected) and got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    assert np.shape(got) == np.shape(expected)


def test_compiled_sigmoid_equals_eager() -> None:
    x = dualflow.tensor(np.random.default_rng(1).normal(size=(16, 16)).astype(np.float32) * 4)
    x.requires_grad_()
    step = dualflow.compile(lambda t: dualflow.grad(ops.sigmoid(t * 2.0).sum(), [t])[0])
    eager = dualflow.grad(ops.sigmoid(x * 2.0).sum(), [x])[0]
    for _ in range(2):  # traced, then the plan
        np.testing.assert_array_equal(step(x).numpy(), eager.numpy())
    np.testing.assert_array_equal(ops.sigmoid(x).numpy(), EXPRESSION(np, x.numpy()))


@pytest.mark.parametrize(
    "x",
    [
        np.linspace(-12, 12, 40, dtype=np.float32).reshape(5, 8),
        np.float32(0.25) * np.ones((), np.float32),
        np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4).T,
        np.linspace(-3, 3, 12).reshape(3, 4),
    ],
)
def test_eager_tanh_takes_the_same_loop_as_numpy_tanh(x: np.ndarray) -> None:
    got, expected = OPS["tanh"].forward(np, x), numpy_tanh(x)
    assert type(got) is type(expected) and got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("checked", [True, False])
def test_the_out_forward_writes_eagers_bits_in_one_pass(checked: bool) -> None:
    # a plan step of sigmoid (O0, or left unfused) writes into its buffer with the loop: eager's
    # bits for C-ordered float32, in place too; other dtypes and layouts take the expression
    from dualflow.ops import OPS

    op = OPS["sigmoid"]
    forward = op.out_forward(checked)
    x = (np.random.default_rng(3).standard_normal((64, 33)) * 20).astype(np.float32)
    want = op.forward(np, x).view(np.uint32)
    out = np.empty_like(x)
    assert forward(np, x, out=out) is out
    np.testing.assert_array_equal(out.view(np.uint32), want)
    inplace = x.copy()
    np.testing.assert_array_equal(forward(np, inplace, out=inplace).view(np.uint32), want)
    x64 = x.astype(np.float64)
    np.testing.assert_array_equal(forward(np, x64, out=np.empty_like(x64)), op.forward(np, x64))
    strided = x[:, ::2]
    got = forward(np, strided, out=np.empty(strided.shape, np.float32))
    np.testing.assert_array_equal(np.asarray(got), op.forward(np, strided))
