"""Typed errors name the op, the offending shapes/dtypes and the user's source line (DESIGN §9);
debug mode reports NaN/Inf in outputs and gradients with the op and the line that created it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest

import dualflow
from dualflow import ops
from dualflow._config import Config
from dualflow.errors import (
    DeviceError,
    DTypeError,
    DualflowError,
    NumericalError,
    ShapeError,
)
from dualflow.tensor.tape import GraphReleasedError

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

HERE = os.path.basename(__file__)
LOCATION_BUG = (
    "BUG: errors.user_frame() stops at the exec-generated public functions of elementwise ops "
    "(filename '<ops.NAME>'), so the message says 'at <ops.add>:2' instead of the user's line"
)


def _next_line() -> int:
    """The line number just after the caller's current line."""
    return sys._getframe(1).f_lineno + 1


def _where(line: int) -> str:
    return f"{HERE}:{line}"


@pytest.fixture(autouse=True)
def restore_debug() -> Iterator[None]:
    before = (dualflow.config.debug, Config.debug)
    yield
    dualflow.config.debug, Config.debug = before


def test_error_classes_derive_from_builtin_types() -> None:
    assert issubclass(ShapeError, ValueError) and issubclass(ShapeError, DualflowError)
    assert issubclass(DTypeError, TypeError) and issubclass(DTypeError, DualflowError)
    assert issubclass(DeviceError, DualflowError)
    assert issubclass(NumericalError, FloatingPointError)


# ----- ShapeError ------------------------------------------------------------------------------
def test_shape_error_of_ops_add_names_op_and_shapes() -> None:
    with pytest.raises(ShapeError) as info:
        ops.add(np.ones((2, 3)), np.ones(4))
    message = str(info.value)
    assert "add" in message and "(2, 3)" in message and "(4,)" in message


def test_shape_error_of_ops_add_has_the_user_line() -> None:
    with pytest.raises(ShapeError) as info:
        line = _next_line()
        ops.add(np.ones((2, 3)), np.ones(4))
    assert _where(line) in str(info.value)


def test_shape_error_of_an_operator_has_op_shapes_and_line() -> None:
    a, b = dualflow.tensor(np.ones((2, 3))), dualflow.tensor(np.ones(4))
    with pytest.raises(ShapeError) as info:
        line = _next_line()
        _ = a + b
    message = str(info.value)
    assert "add" in message and "(2, 3)" in message and "(4,)" in message
    assert _where(line) in message


def test_shape_error_of_a_primitive_has_op_shapes_and_line() -> None:
    with pytest.raises(ShapeError) as info:
        line = _next_line()
        ops.matmul(np.ones((2, 3)), np.ones((4, 2)))
    message = str(info.value)
    assert "matmul" in message and "(2, 3)" in message and "(4, 2)" in message
    assert _where(line) in message


def test_shape_error_of_reshape_has_shapes_and_line() -> None:
    t = dualflow.tensor(np.ones(6))
    with pytest.raises(ShapeError) as info:
        line = _next_line()
        t.reshape(4)
    message = str(info.value)
    assert "reshape" in message and "(6,)" in message and "(4,)" in message
    assert _where(line) in message


def test_shape_error_of_backward_seed_has_shapes_and_line() -> None:
    x = dualflow.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    with pytest.raises(ShapeError) as info:
        line = _next_line()
        y.backward(np.ones(3))
    message = str(info.value)
    assert "(3,)" in message and "(2,)" in message and _where(line) in message


def test_graph_released_error_has_the_line() -> None:
    x = dualflow.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(GraphReleasedError) as info:
        line = _next_line()
        y.backward()
    assert _where(line) in str(info.value)


# ----- DTypeError ------------------------------------------------------------------------------
def test_dtype_error_of_matmul_on_bool_names_op_dtype_and_line() -> None:
    m = np.ones((2, 2), bool)
    with pytest.raises(DTypeError) as info:
        line = _next_line()
        ops.matmul(m, m)
    message = str(info.value)
    assert "matmul" in message and "bool" in message and _where(line) in message


def test_dtype_error_of_an_unsupported_operand_names_dtypes_and_line() -> None:
    t = dualflow.tensor(np.ones(3))
    with pytest.raises(DTypeError) as info:
        line = _next_line()
        _ = t * "a"
    message = str(info.value)
    assert "multiply" in message and "float64" in message and _where(line) in message


def test_dtype_error_of_int_requires_grad_names_dtype_and_fix() -> None:
    with pytest.raises(DTypeError) as info:
        dualflow.tensor([1, 2], requires_grad=True)
    message = str(info.value)
    assert "int64" in message and "float32" in message


def test_dtype_error_of_int_requires_grad_has_the_line() -> None:
    with pytest.raises(DTypeError) as info:
        line = _next_line()
        dualflow.tensor([1, 2], requires_grad=True)
    assert _where(line) in str(info.value)


# ----- DeviceError -----------------------------------------------------------------------------
def test_device_error_names_the_device_and_the_fix() -> None:
    with pytest.raises(DeviceError) as info:
        dualflow.Device("tpu")
    message = str(info.value)
    assert "'tpu'" in message and "cuda:N" in message


def test_device_error_has_the_line() -> None:
    with pytest.raises(DeviceError) as info:
        line = _next_line()
        dualflow.Device("tpu")
    assert _where(line) in str(info.value)


# ----- debug mode: NumericalError --------------------------------------------------------------
def test_debug_reports_nan_output_of_an_operator_with_op_and_line() -> None:
    dualflow.set_debug(True)
    t = dualflow.tensor([0.0])
    with pytest.raises(NumericalError) as info:
        line = _next_line()
        _ = t / 0.0
    message = str(info.value)
    assert "divide" in message and "NaN" in message and _where(line) in message


def test_debug_reports_nan_output_of_ops_log() -> None:
    dualflow.set_debug(True)
    with pytest.raises(NumericalError, match=r"log: output contains NaN"):
        ops.log(dualflow.tensor([-1.0]))


def test_debug_reports_the_user_line_of_ops_log() -> None:
    dualflow.set_debug(True)
    with pytest.raises(NumericalError) as info:
        line = _next_line()
        ops.log(dualflow.tensor([-1.0]))
    assert _where(line) in str(info.value)


def test_debug_reports_an_inf_gradient_with_the_forward_line() -> None:
    dualflow.set_debug(True)
    x = dualflow.tensor([1.0], requires_grad=True)
    line = _next_line()
    y = x + 1
    with pytest.raises(NumericalError) as info:
        y.backward(np.array([np.inf], np.float32))
    message = str(info.value)
    assert "add" in message and "gradient" in message and _where(line) in message


def test_debug_reports_nan_produced_only_in_backward() -> None:
    dualflow.set_debug(True)
    x = dualflow.tensor([0.0, 1.0], requires_grad=True)
    y = ops.sqrt(x).sum()  # finite forward; d/dx sqrt(x) = inf at 0
    with pytest.raises(NumericalError):
        y.backward()


def test_debug_names_the_forward_op_and_line_of_a_nan_gradient() -> None:
    dualflow.set_debug(True)
    x = dualflow.tensor([0.0, 1.0], requires_grad=True)
    line = _next_line()
    y = ops.sqrt(x)
    with pytest.raises(NumericalError) as info:
        y.sum().backward()
    message = str(info.value)
    assert "sqrt" in message and _where(line) in message


def test_without_debug_numpy_semantics_apply() -> None:
    dualflow.set_debug(False)
    assert np.isnan(ops.log(dualflow.tensor([-1.0])).item())
    x = dualflow.tensor([0.0, 1.0], requires_grad=True)
    ops.sqrt(x).sum().backward()
    assert not np.isfinite(x.grad.numpy()[0]) and x.grad.numpy()[1] == pytest.approx(0.5)


def test_debug_mode_passes_finite_computations() -> None:
    dualflow.set_debug(True)
    x = dualflow.tensor([0.5, 1.0], requires_grad=True)
    ops.log(ops.sqrt(x) + 1).sum().backward()
    assert np.isfinite(x.grad.numpy()).all()


def test_set_debug_toggles_config() -> None:
    dualflow.set_debug(True)
    assert dualflow.config.debug
    dualflow.set_debug(False)
    assert not dualflow.config.debug


@pytest.mark.parametrize("value, expected", [("1", "True"), ("0", "False")])
def test_dualflow_debug_env_turns_debug_on_at_import(value: str, expected: str) -> None:
    env = dict(os.environ, DUALFLOW_DEBUG=value)
    code = "import dualflow; print(dualflow.config.debug)"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == expected


def test_a_folder_counted_as_user_code_is_where_user_frame_stops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dualflow import errors
    from dualflow.tracer import user_code

    folder = os.path.join(os.path.dirname(errors.__file__), "made_up_workloads")
    code = compile("where = user_frame(1)", os.path.join(folder, "w.py"), "exec")
    scope = {"user_frame": errors.user_frame}
    exec(code, scope)  # a file inside the package: not user code, the frame is this test's
    assert scope["where"][0] == __file__
    monkeypatch.setattr(errors, "_USER_FOLDERS", [*errors._USER_FOLDERS])
    monkeypatch.setattr(user_code, "_USER_FILES", {})
    errors.count_as_user_code(folder)
    exec(code, scope)
    assert scope["where"] == (os.path.join(folder, "w.py"), 1)
    assert user_code.is_user_file(os.path.join(folder, "w.py"))
    assert not user_code.is_user_file(errors.__file__)
