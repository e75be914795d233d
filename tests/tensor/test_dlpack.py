"""DLPack on the CPU: ``dualflow.from_dlpack`` and ``Tensor.__dlpack__``/``__dlpack_device__``
share memory with numpy (and torch, when installed) both ways, keep dtype, shape and strides, and
reject what they cannot read with a message naming the object. CUDA interop is in tests/gpu/.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import device as device_module
from dualflow.errors import DeviceError, TracingError

DTYPES = ["float32", "float64", "float16", "int64", "int32", "uint8", "bool", "complex64"]


class _Foreign:
    """A DLPack producer on a device of the test's choosing (numpy memory underneath)."""

    def __init__(self, device: tuple[int, int]) -> None:
        self.device, self.data = device, np.zeros(3)

    def __dlpack__(self, **kwargs: object) -> object:
        return self.data.__dlpack__()

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_to_tensor_shares_memory_and_keeps_dtype(dtype: str) -> None:
    a = (np.arange(12) % 3).astype(dtype).reshape(3, 4)
    t = dualflow.from_dlpack(a)
    assert isinstance(t, dualflow.Tensor) and t.is_leaf and not t.requires_grad
    assert t.dtype == a.dtype and t.shape == (3, 4)
    assert np.shares_memory(t.numpy(), a)
    np.testing.assert_array_equal(t.numpy(), a)


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensor_to_numpy_shares_memory_and_keeps_dtype(dtype: str) -> None:
    t = dualflow.tensor((np.arange(6) % 2).astype(dtype).reshape(2, 3))
    b = np.from_dlpack(t)
    assert b.dtype == t.dtype and b.shape == t.shape
    assert np.shares_memory(b, t.array)
    assert t.__dlpack_device__() == (1, 0)


def test_round_trips_see_each_others_writes() -> None:
    a = np.zeros((2, 3), np.float32)
    t = dualflow.from_dlpack(a)
    back = np.from_dlpack(t)
    assert np.shares_memory(back, a)
    back[1, 2] = 5.0
    assert t.tolist()[1][2] == 5.0 and a[1, 2] == 5.0
    again = dualflow.from_dlpack(t)  # a Tensor is a DLPack producer too
    assert np.shares_memory(again.array, a)


@pytest.mark.parametrize(
    "view",
    [
        lambda a: a[:, ::2],  # strided
        lambda a: a.T,  # transposed
        lambda a: a[1, 2, ...],  # 0-d (a view, not a numpy scalar)
        lambda a: a[:0],  # empty
    ],
    ids=["strided", "transposed", "0-d", "empty"],
)
def test_views_keep_shape_strides_and_values(view: object) -> None:
    base = np.arange(24.0).reshape(4, 6)
    a = view(base)  # type: ignore[operator]
    t = dualflow.from_dlpack(a)
    assert t.shape == a.shape and t.array.strides == a.strides
    np.testing.assert_array_equal(t.numpy(), a)
    np.testing.assert_array_equal(np.from_dlpack(t), a)
    if a.size:
        assert np.shares_memory(t.array, base)


def test_dlpack_keywords_are_forwarded_to_the_array() -> None:
    t = dualflow.tensor([1.0, 2.0])
    capsule = t.__dlpack__(stream=None, max_version=(1, 0))
    assert type(capsule).__name__ == "PyCapsule"
    with pytest.raises(RuntimeError, match="stream=None"):  # numpy's own check, reached
        t.__dlpack__(stream=1)


def test_imported_tensor_takes_part_in_autograd() -> None:
    t = dualflow.from_dlpack(np.array([1.0, 2.0, 3.0])).requires_grad_()
    (t * t).sum().backward()
    assert t.grad.tolist() == [2.0, 4.0, 6.0]


def test_objects_without_dlpack_are_rejected_by_name() -> None:
    with pytest.raises(TypeError, match=r"from_dlpack: list has no __dlpack__"):
        dualflow.from_dlpack([1.0, 2.0])


def test_unknown_dlpack_device_raises_device_error() -> None:
    with pytest.raises(DeviceError, match=r"_Foreign lives on DLPack device type 4 \(index 0\)"):
        dualflow.from_dlpack(_Foreign((4, 0)))  # kDLOpenCL


def test_cuda_memory_without_cupy_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device_module, "_cupy", lambda: None)
    with pytest.raises(DeviceError, match=r"cuda:1 needs cupy.*dualflow\[cuda12\]"):
        dualflow.from_dlpack(_Foreign((2, 1)))  # kDLCUDA, device 1


def test_export_inside_a_compiled_function_fails_closed() -> None:
    @dualflow.compile(fallback="error")
    def leak(x: dualflow.Tensor) -> dualflow.Tensor:
        np.from_dlpack(x)  # the raw memory of a traced value would be baked into the graph
        return x

    with pytest.raises(TracingError, match=r"reading \.array"):
        leak(dualflow.tensor([1.0]))


def test_torch_cpu_round_trip_shares_memory() -> None:
    torch = pytest.importorskip("torch")
    source = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    t = dualflow.from_dlpack(source)
    assert t.dtype == np.float32 and t.shape == (2, 3)
    source[0, 0] = 9.0
    assert t.tolist()[0][0] == 9.0
    back = torch.from_dlpack(t)
    assert back.data_ptr() == source.data_ptr() and back.dtype == torch.float32


def test_a_tensor_that_requires_grad_is_not_exported() -> None:
    # PyTorch refuses these (issue 19): the consumer would share memory outside autograd
    t = dualflow.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"__dlpack__: can't export a tensor that requires grad"):
        np.from_dlpack(t)
    shared = np.from_dlpack(t.detach())
    assert np.shares_memory(shared, t.detach().numpy())
