"""The public gradient checks catch wrong first- and second-order backwards and pass right ones.

The ops under test are built as bare ``OpDef``s (never registered) and called through ``apply``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import ops
from dualflow.gradcheck import check_backward, check_double_backward
from dualflow.ops import OPS
from dualflow.ops.dispatch import apply
from dualflow.ops.registry import Meta, OpDef


def _cube_op(backward: Callable[..., Any], name: str = "test_cube") -> OpDef:
    def infer(x: Meta) -> tuple[Meta]:
        return (Meta(tuple(x.shape), x.dtype),)

    def forward(xp: Any, x: Any) -> Any:
        return x * x * x

    return OpDef(name, "primitive", forward, infer, backward=backward, saves=("x0",))


def _right(ctx: Any, gy: Any) -> Any:
    x = ctx.x0
    return gy * 3 * x * x


def _wrong_factor(ctx: Any, gy: Any) -> Any:
    x = ctx.x0
    return gy * 2 * x * x


def _not_differentiable(ctx: Any, gy: Any) -> Any:
    # Right values, but computed from the raw array: double backward sees a constant.
    x = ctx.x0
    return gy * dualflow.as_tensor(3 * x.array * x.array)


X = np.array([0.3, -1.2, 0.8, 2.0])


def test_bare_opdef_is_not_registered() -> None:
    _cube_op(_right)
    assert "test_cube" not in OPS


def test_check_backward_passes_for_a_right_backward() -> None:
    op = _cube_op(_right)
    check_backward(lambda x: apply(op, x), [X])


def test_check_backward_catches_a_wrong_backward() -> None:
    op = _cube_op(_wrong_factor)
    with pytest.raises(AssertionError, match="differs from finite differences"):
        check_backward(lambda x: apply(op, x), [X])


def test_check_backward_catches_a_wrong_broadcast_gradient() -> None:
    def infer(a: Meta, b: Meta) -> tuple[Meta]:
        return (Meta(np.broadcast_shapes(a.shape, b.shape), a.dtype),)

    def forward(xp: Any, a: Any, b: Any) -> Any:
        return a * b

    def backward(ctx: Any, gy: Any) -> Any:
        return gy * ctx.x1, gy  # the gradient for b is wrong (should be gy * a)

    op = OpDef("test_mul", "primitive", forward, infer, backward=backward, saves=("x1",))
    with pytest.raises(AssertionError, match="input 1"):
        check_backward(lambda a, b: apply(op, a, b), [np.ones((2, 3)) * 0.5, np.arange(3.0)])


def test_check_backward_with_explicit_grad_outputs() -> None:
    op = _cube_op(_right)
    check_backward(lambda x: apply(op, x), [X], grad_outputs=[np.array([1.0, 0.0, 2.0, -1.0])])


def test_check_backward_ignores_integer_inputs() -> None:
    check_backward(lambda x, k: x * k, [X, np.array([1, 2, 3, 4])])


def test_check_double_backward_passes_for_a_differentiable_backward() -> None:
    op = _cube_op(_right)
    check_double_backward(lambda x: apply(op, x), [X])


def test_check_double_backward_catches_a_backward_on_raw_arrays() -> None:
    op = _cube_op(_not_differentiable)
    check_backward(lambda x: apply(op, x), [X])  # first order is right ...
    with pytest.raises(AssertionError):  # ... second order is not
        check_double_backward(lambda x: apply(op, x), [X])


def test_check_double_backward_catches_a_wrong_gradient_op_backward() -> None:
    # The cube's backward calls a dedicated gradient op (square) whose own backward is wrong.
    def infer(x: Meta) -> tuple[Meta]:
        return (Meta(tuple(x.shape), x.dtype),)

    square = OpDef(
        "test_square",
        "primitive",
        lambda xp, x: x * x,
        infer,
        backward=lambda ctx, gy: gy * ctx.x0,  # should be 2 * gy * x
        saves=("x0",),
    )
    op = _cube_op(lambda ctx, gy: gy * 3 * apply(square, ctx.x0))
    check_backward(lambda x: apply(op, x), [X])
    with pytest.raises(AssertionError):
        check_double_backward(lambda x: apply(op, x), [X])


def test_check_double_backward_does_not_recheck_first_order() -> None:
    # Like Chainer's, it differentiates the backward as written: a consistently wrong factor
    # is a first-order error, which check_backward (above) is for.
    op = _cube_op(_wrong_factor)
    check_double_backward(lambda x: apply(op, x), [X])


@pytest.mark.parametrize(
    "fn, inputs",
    [
        (lambda x: ops.tanh(x) * ops.sin(x), [X]),
        (
            lambda a, b: ops.matmul(ops.tanh(a), b),
            [np.ones((2, 3)) * 0.3, np.arange(6.0).reshape(3, 2) / 5],
        ),
        (lambda x: ops.exp(-(x * x)).sum(), [X]),
        (
            lambda a, b: a / (b * b + 1) + ops.maximum(a, b),
            [np.array([0.5, 2.0]), np.array([1.0, -0.4])],
        ),
        (lambda x: ops.sigmoid(x) ** 3, [X]),
    ],
    ids=["tanh*sin", "matmul(tanh)", "gaussian-sum", "div-max", "sigmoid-cubed"],
)
def test_check_double_backward_on_composed_functions(fn: Callable, inputs: list) -> None:
    check_double_backward(fn, inputs)
