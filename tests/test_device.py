"""Devices on a CPU-only machine: spec parsing, the DeviceErrors that name the spec or the extra
to install, zero-copy moves, ``Tensor.to_device`` / ``Module.to_device`` and their guards.

What needs a GPU (moves to cuda, mixing devices in one op) is in tests/gpu/.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

import dualflow
from dualflow import Device, nn
from dualflow import device as device_module
from dualflow.device import device_of, get_array_module, send
from dualflow.errors import DeviceError, TracingError


@pytest.fixture
def no_cupy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Behave as if cupy were not installed, whether or not it is."""
    monkeypatch.setattr(device_module, "_cupy", lambda: None)


@pytest.fixture
def fake_cupy(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """A cupy whose runtime reports a count set by the test (``count``, or ``error`` raised)."""
    state = types.SimpleNamespace(count=0, error=None)

    def get_device_count() -> int:
        if state.error is not None:
            raise state.error
        return state.count

    runtime = types.SimpleNamespace(getDeviceCount=get_device_count)
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime))
    monkeypatch.setattr(device_module, "_cupy", lambda: fake)
    monkeypatch.setattr(device_module, "_CHECKED", set())
    state.module = fake
    return state


# ----- parsing ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "kind", "index"),
    [
        ("cpu", "cpu", 0),
        ("CPU", "cpu", 0),
        ("cpu:0", "cpu", 0),
        ("cuda", "cuda", 0),
        ("cuda:1", "cuda", 1),
        ("gpu", "cuda", 0),
        ("gpu:0", "cuda", 0),
        (" CUDA:2 ", "cuda", 2),
        ("cuda:10", "cuda", 10),
    ],
)
def test_device_specs_parse(spec: str, kind: str, index: int) -> None:
    device = Device(spec)
    assert (device.kind, device.index) == (kind, index)
    assert Device(device) == device and hash(Device(device)) == hash(device)
    assert Device(str(device)) == device  # str() gives the canonical spec back


def test_canonical_names_and_equality() -> None:
    assert str(Device("GPU:3")) == "cuda:3" and repr(Device("gpu:3")) == "Device('cuda:3')"
    assert Device("cuda") == Device("cuda:0") != Device("cuda:1")
    assert Device("cpu") != "cpu"  # a Device equals Devices only, not strings
    assert len({Device("cuda"), Device("gpu:0"), Device(" CUDA:0")}) == 1


@pytest.mark.parametrize(
    "spec", ["tpu", "cuda:", "cuda:-1", "cuda:1:2", "cuda:x", "cpu:1", "", "cuda 0", "cuda:١"]
)
def test_bad_spec_raises_device_error_naming_it(spec: str) -> None:
    with pytest.raises(DeviceError) as info:
        Device(spec)
    message = str(info.value)
    assert repr(spec) in message and "cuda:N" in message and "'cpu'" in message
    assert "test_device.py" in message  # the user's line


@pytest.mark.parametrize("spec", [0, None, 1.5])
def test_non_string_spec_raises_device_error_naming_its_type(spec: object) -> None:
    with pytest.raises(DeviceError, match=type(spec).__name__):
        Device(spec)  # type: ignore[arg-type]


# ----- the array module --------------------------------------------------------------------------
def test_cpu_xp_is_numpy() -> None:
    assert Device("cpu").xp is np and get_array_module(np.ones(2), 3.0) is np


def test_cuda_xp_without_cupy_names_the_extra(no_cupy: None) -> None:
    with pytest.raises(DeviceError) as info:
        _ = Device("cuda:0").xp
    message = str(info.value)
    assert "cuda:0" in message and "cupy" in message and "pip install 'dualflow[cuda12]'" in message


def test_cuda_xp_with_cupy_but_no_gpu_says_what_cupy_sees(fake_cupy: types.SimpleNamespace) -> None:
    fake_cupy.error = RuntimeError("cudaErrorInsufficientDriver")
    with pytest.raises(DeviceError, match=r"cuda:0 is not available.*0 CUDA.*InsufficientDriver"):
        _ = Device("cuda:0").xp
    fake_cupy.error, fake_cupy.count = None, 1
    assert Device("cuda:0").xp is fake_cupy.module
    with pytest.raises(DeviceError, match=r"cuda:1 is not available: cupy sees 1 CUDA device"):
        _ = Device("cuda:1").xp


# ----- moving arrays and tensors -----------------------------------------------------------------
def test_send_is_zero_copy_on_the_same_device() -> None:
    a = np.arange(4.0)
    assert send(a, "cpu") is a and send(a, Device("cpu:0")) is a
    assert device_of(a) == Device("cpu") and device_of(np.float32(1)) == Device("cpu")


def test_send_to_cuda_without_cupy_raises(no_cupy: None) -> None:
    with pytest.raises(DeviceError, match="dualflow\\[cuda12\\]"):
        send(np.ones(2), "cuda:0")


def test_tensor_to_device_same_device_is_the_same_object() -> None:
    x = dualflow.tensor([1.0, 2.0], requires_grad=True)
    assert x.to_device("cpu") is x and x.to_device(Device("CPU")) is x
    y = (x * 2).to_device("cpu")  # a non-leaf stays connected: it is the same tensor
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_tensor_to_device_errors(no_cupy: None) -> None:
    x = dualflow.tensor([1.0])
    with pytest.raises(DeviceError, match="'tpu'"):
        x.to_device("tpu")
    with pytest.raises(DeviceError, match=r"cuda:0 needs cupy.*dualflow\[cuda12\]"):
        x.to_device("cuda:0")
    with pytest.raises(DeviceError, match="dualflow\\[cuda12\\]"):
        dualflow.tensor([1.0], device="cuda")


def test_to_another_device_inside_a_compiled_function_fails_closed() -> None:
    @dualflow.compile(fallback="error")
    def step(x: dualflow.Tensor) -> dualflow.Tensor:
        return x.to_device("cuda:0") * 2  # checked before any cupy is needed

    with pytest.raises(TracingError, match=r"to_device: moving a tensor from cpu to cuda:0"):
        step(dualflow.tensor([1.0]))

    @dualflow.compile(fallback="error")
    def stay(x: dualflow.Tensor) -> dualflow.Tensor:
        return x.to_device("cpu") * 2  # already there: no move, nothing to refuse

    assert stay(dualflow.tensor([1.0])).tolist() == [2.0]


def test_tensor_factory_copies_arrays_and_keeps_their_dtype() -> None:
    a = np.arange(3, dtype=np.float64)
    t = dualflow.tensor(a)
    assert t.dtype == np.float64 and not np.shares_memory(t.array, a)
    u = dualflow.tensor(t, dtype="float32")
    assert u.dtype == np.float32 and u.tolist() == [0.0, 1.0, 2.0]
    assert dualflow.tensor(np.float64(2.0)).dtype == np.float64
    assert dualflow.tensor(2.0).dtype == np.float32  # Python floats: float32


# ----- Module.to_device --------------------------------------------------------------------------
def test_module_to_device_same_device_keeps_arrays() -> None:
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    arrays = [t.array for t in model.state_dict().values()]
    model[0].weight.grad = dualflow.tensor(np.ones((4, 3), np.float32))
    grad = model[0].weight.grad
    assert model.to_device("cpu") is model
    assert [t.array for t in model.state_dict().values()] == arrays  # the very same arrays
    assert model[0].weight.grad is grad


def test_module_to_device_failure_moves_nothing(no_cupy: None) -> None:
    model = nn.Linear(2, 2)
    before = {k: v.array for k, v in model.state_dict().items()}
    for spec in ("tpu", "cuda:0"):
        with pytest.raises(DeviceError):
            model.to_device(spec)
        assert all(model.state_dict()[k].array is a for k, a in before.items())


def test_module_to_device_inside_a_compiled_function_fails_closed() -> None:
    model = nn.Linear(2, 2)

    @dualflow.compile(fallback="error")
    def step(x: dualflow.Tensor) -> dualflow.Tensor:
        model.to_device("cpu")
        return model(x)

    with pytest.raises(TracingError, match=r"Module.to_device\('cpu'\) inside a compiled"):
        step(dualflow.tensor(np.ones((1, 2), np.float32)))
