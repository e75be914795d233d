"""Bad input to conv and pooling ops raises ShapeError/DTypeError naming the op and the shapes."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from dualflow import ops
from dualflow.errors import DTypeError, ShapeError


def _a(*shape: int, dtype: str = "float32") -> np.ndarray:
    return np.ones(shape, dtype=dtype)


SHAPE_CASES = [
    ("rank", lambda: ops.conv2d(_a(3, 5, 5), _a(4, 3, 3, 3)), "conv2d", ["(3, 5, 5)"]),
    ("w-rank", lambda: ops.conv2d(_a(1, 3, 5, 5), _a(4, 3, 3)), "conv2d", ["(4, 3, 3)"]),
    (
        "channels",
        lambda: ops.conv2d(_a(1, 3, 5, 5), _a(4, 2, 3, 3)),
        "conv2d",
        ["(1, 3, 5, 5)", "(4, 2, 3, 3)"],
    ),
    (
        "groups-divide",
        lambda: ops.conv2d(_a(1, 4, 5, 5), _a(3, 2, 3, 3), groups=2),
        "conv2d",
        ["groups=2", "(1, 4, 5, 5)", "(3, 2, 3, 3)"],
    ),
    (
        "groups-channels",
        lambda: ops.conv2d(_a(1, 6, 5, 5), _a(4, 2, 3, 3), groups=2),
        "conv2d",
        ["(1, 6, 5, 5)", "(4, 2, 3, 3)"],
    ),
    (
        "output-size",
        lambda: ops.conv2d(_a(1, 3, 2, 2), _a(4, 3, 3, 3)),
        "conv2d",
        ["(1, 3, 2, 2)", "(4, 3, 3, 3)", "not positive"],
    ),
    (
        "dilated-output-size",
        lambda: ops.conv2d(_a(1, 3, 4, 4), _a(4, 3, 3, 3), dilation=2),
        "conv2d",
        ["(1, 3, 4, 4)", "dilation"],
    ),
    ("bias", lambda: ops.conv2d(_a(1, 3, 5, 5), _a(4, 3, 3, 3), _a(3)), "conv2d", ["(3,)"]),
    ("stride-zero", lambda: ops.conv2d(_a(1, 3, 5, 5), _a(4, 3, 3, 3), stride=0), "conv2d", []),
    ("pad-negative", lambda: ops.conv2d(_a(1, 3, 5, 5), _a(4, 3, 3, 3), pad=-1), "conv2d", []),
    ("pad-triple", lambda: ops.conv2d(_a(1, 3, 5, 5), _a(4, 3, 3, 3), pad=(1, 1, 1)), "conv2d", []),
    (
        "transpose-channels",
        lambda: ops.conv_transpose2d(_a(1, 3, 4, 4), _a(4, 2, 3, 3)),
        "conv_transpose2d",
        ["(1, 3, 4, 4)", "(4, 2, 3, 3)"],
    ),
    (
        "transpose-output-padding",
        lambda: ops.conv_transpose2d(_a(1, 3, 4, 4), _a(3, 2, 3, 3), stride=2, output_padding=2),
        "conv_transpose2d",
        ["output_padding"],
    ),
    (
        "transpose-output-size",
        lambda: ops.conv_transpose2d(_a(1, 3, 1, 1), _a(3, 2, 1, 1), pad=1),
        "conv_transpose2d",
        ["(1, 3, 1, 1)", "not positive"],
    ),
    (
        "grad-weight-gy",
        lambda: ops.conv2d_grad_weight(_a(2, 3, 5, 5), _a(2, 4, 2, 2), 3),
        "conv2d_grad_weight",
        ["(2, 3, 5, 5)", "(2, 4, 2, 2)"],
    ),
    ("max-rank", lambda: ops.max_pool2d(_a(3, 4, 4), 2), "max_pool2d", ["(3, 4, 4)"]),
    ("max-pad", lambda: ops.max_pool2d(_a(1, 1, 4, 4), 2, pad=2), "max_pool2d", ["pad"]),
    ("max-size", lambda: ops.max_pool2d(_a(1, 1, 1, 1), 2), "max_pool2d", ["(1, 1, 1, 1)"]),
    (
        "max-grad-gy",
        lambda: ops.max_pool2d_grad(_a(1, 1, 4, 4), _a(1, 1, 3, 3), 2),
        "max_pool2d_grad",
        ["(1, 1, 4, 4)", "(1, 1, 3, 3)"],
    ),
    (
        "max-gather-g",
        lambda: ops.max_pool2d_gather(_a(1, 1, 4, 4), _a(1, 1, 2, 2), 2),
        "max_pool2d_gather",
        ["(1, 1, 4, 4)", "(1, 1, 2, 2)"],
    ),
    ("avg-rank", lambda: ops.avg_pool2d(_a(4, 4), 2), "avg_pool2d", ["(4, 4)"]),
    (
        "avg-grad-gy",
        lambda: ops.avg_pool2d_grad(_a(1, 1, 3, 3), (4, 4), 2),
        "avg_pool2d_grad",
        ["(1, 1, 3, 3)"],
    ),
    ("global-rank", lambda: ops.global_avg_pool2d(_a(2, 3, 4)), "global_avg_pool2d", ["(2, 3, 4)"]),
]


@pytest.mark.parametrize(
    ("fn", "op", "parts"), [c[1:] for c in SHAPE_CASES], ids=[c[0] for c in SHAPE_CASES]
)
def test_shape_errors_name_op_and_shapes(fn: Callable, op: str, parts: list[str]) -> None:
    with pytest.raises(ShapeError) as info:
        fn()
    message = str(info.value)
    assert message.startswith(f"{op}:"), message
    for part in parts:
        assert part in message, f"{part!r} not in {message!r}"


DTYPE_CASES = [
    ("conv-x-int", lambda: ops.conv2d(_a(1, 3, 5, 5, dtype="int64"), _a(4, 3, 3, 3)), "conv2d"),
    ("conv-w-int", lambda: ops.conv2d(_a(1, 3, 5, 5), _a(4, 3, 3, 3, dtype="int32")), "conv2d"),
    (
        "transpose-int",
        lambda: ops.conv_transpose2d(_a(1, 3, 4, 4, dtype="int64"), _a(3, 2, 3, 3)),
        "conv_transpose2d",
    ),
    ("max-int", lambda: ops.max_pool2d(_a(1, 1, 4, 4, dtype="int64"), 2), "max_pool2d"),
    ("avg-bool", lambda: ops.avg_pool2d(_a(1, 1, 4, 4, dtype="bool"), 2), "avg_pool2d"),
]


@pytest.mark.parametrize(
    ("fn", "op"), [c[1:] for c in DTYPE_CASES], ids=[c[0] for c in DTYPE_CASES]
)
def test_int_inputs_raise_dtype_error(fn: Callable, op: str) -> None:
    with pytest.raises(DTypeError) as info:
        fn()
    message = str(info.value)
    assert message.startswith(f"{op}:"), message
    assert "floating-point" in message, message
    assert "int" in message or "bool" in message, message


def test_error_points_at_user_line() -> None:
    with pytest.raises(ShapeError) as info:
        ops.conv2d(_a(1, 3, 5, 5), _a(4, 2, 3, 3))
    assert "test_conv_errors.py" in str(info.value)
