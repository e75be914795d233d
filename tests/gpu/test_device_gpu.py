"""Devices with a GPU: moves to and from ``cuda:0`` (zero-copy when already there, differentiable
both ways), DLPack with cupy and torch, the DeviceError for mixed devices, ``Module.to_device``
and RNG draws that are the same on both devices.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import Device, nn, ops
from dualflow.device import device_of, send
from dualflow.errors import DeviceError
from dualflow.tensor.random import Generator

pytestmark = pytest.mark.gpu
CUDA = Device("cuda:0")


def test_cuda_device_module_and_visibility(cupy) -> None:
    assert CUDA.xp is cupy
    count = cupy.cuda.runtime.getDeviceCount()
    with pytest.raises(DeviceError, match=rf"cuda:{count} is not available: cupy sees {count}"):
        _ = Device(f"cuda:{count}").xp


def test_send_round_trip_and_zero_copy(cupy) -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    g = send(a, "cuda:0")
    assert isinstance(g, cupy.ndarray) and device_of(g) == CUDA
    assert send(g, CUDA) is g  # already there: the same array
    back = send(g, "cpu")
    assert isinstance(back, np.ndarray) and back.dtype == a.dtype
    np.testing.assert_array_equal(back, a)


def test_tensor_to_device_round_trip(cupy) -> None:
    x = dualflow.tensor(np.linspace(-1, 1, 12).reshape(3, 4))  # float64 stays float64
    g = x.to_device("cuda:0")
    assert g is not x and g.device == CUDA and isinstance(g.array, cupy.ndarray)
    assert g.dtype == np.float64 and g.shape == (3, 4)
    assert g.to_device("cuda") is g  # zero-copy when already there
    np.testing.assert_array_equal(g.to_device("cpu").numpy(), x.numpy())
    t = dualflow.tensor([1, 2, 3], device="cuda:0")
    assert t.device == CUDA and t.dtype == np.int64
    assert dualflow.tensor(t).device == CUDA and dualflow.tensor(t, device="cpu").tolist() == [
        1,
        2,
        3,
    ]


def test_to_device_is_differentiable_both_ways() -> None:
    x = dualflow.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = x.to_device("cuda:0")
    assert y.requires_grad and not y.is_leaf
    z = (y * y).sum()
    (gx,) = dualflow.grad(z, x, create_graph=True)
    assert gx.device == Device("cpu") and gx.tolist() == [2.0, -4.0, 6.0]
    (ggx,) = dualflow.grad(gx.sum(), x)  # double backward through the move
    assert ggx.tolist() == [2.0, 2.0, 2.0]
    w = dualflow.tensor([0.5, 0.5], device="cuda:0", requires_grad=True)
    (w.to_device("cpu") * 4).sum().backward()
    assert w.grad.device == CUDA and w.grad.tolist() == [4.0, 4.0]


def test_mixing_devices_raises_device_error_naming_both_and_the_op() -> None:
    a = dualflow.tensor([1.0, 2.0])
    b = dualflow.tensor([3.0, 4.0], device="cuda:0")
    for call, op in ((lambda: a + b, "add"), (lambda: ops.matmul(a, b), "matmul")):
        with pytest.raises(DeviceError) as info:
            call()
        message = str(info.value)
        assert message.startswith(f"{op}:") and "'cpu'" in message and "'cuda:0'" in message
        assert "to_device" in message and "test_device_gpu.py" in message


def test_dlpack_with_cupy_shares_memory(cupy) -> None:
    c = cupy.arange(12, dtype=cupy.float32).reshape(3, 4)
    t = dualflow.from_dlpack(c)
    assert t.device == CUDA and t.dtype == np.float32 and t.shape == (3, 4)
    assert t.array.data.ptr == c.data.ptr
    assert t.__dlpack_device__()[0] == 2  # kDLCUDA
    back = cupy.from_dlpack(t)
    assert back.data.ptr == c.data.ptr
    back[0, 0] = 7.0
    assert t.tolist()[0][0] == 7.0


def test_dlpack_with_torch_cuda_shares_memory() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch was built without CUDA")
    source = torch.arange(6, dtype=torch.float64, device="cuda:0").reshape(2, 3)
    t = dualflow.from_dlpack(source)
    assert t.device == CUDA and t.dtype == np.float64 and t.array.data.ptr == source.data_ptr()
    back = torch.from_dlpack(t)
    assert back.device.type == "cuda" and back.data_ptr() == source.data_ptr()


def test_module_to_device_moves_params_grads_and_buffers(cupy) -> None:
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    model[0].weight.grad = dualflow.tensor(np.ones((4, 3), np.float32))
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    want = model(dualflow.tensor(x)).numpy()
    assert model.to_device("cuda:0") is model
    for name, t in model.state_dict().items():
        assert t.device == CUDA, name
    assert model[0].weight.grad.device == CUDA
    got = model(dualflow.tensor(x, device="cuda:0"))
    assert got.device == CUDA
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    model.to_device("cpu")
    assert all(t.device == Device("cpu") for t in model.state_dict().values())


def test_rng_draws_are_the_same_on_both_devices() -> None:
    for dtype in ("float32", "float64"):
        cpu = dualflow.random.uniform((1000,), dtype=dtype, generator=Generator(7))
        gpu = dualflow.random.uniform((1000,), dtype=dtype, generator=Generator(7, "cuda:0"))
        assert gpu.device == CUDA
        np.testing.assert_array_equal(gpu.numpy(), cpu.numpy())
        cpu = dualflow.random.normal((1000,), dtype=dtype, generator=Generator(8))
        gpu = dualflow.random.normal((1000,), dtype=dtype, generator=Generator(8, "cuda:0"))
        np.testing.assert_allclose(gpu.numpy(), cpu.numpy(), rtol=1e-5, atol=1e-6)
    x = dualflow.tensor(np.ones((64, 64), np.float32), device="cuda:0")
    dualflow.random.seed(3)
    first = ops.dropout(x, 0.5, train=True)
    dualflow.random.seed(3)
    again = ops.dropout(x, 0.5, train=True)
    assert first.device == CUDA  # the cuda:0 default generator, reseeded by seed()
    np.testing.assert_array_equal(first.numpy(), again.numpy())
