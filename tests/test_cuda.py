"""``dualflow.cuda.is_available()``/``device_count()`` and ``dualflow.device(...)`` as PyTorch's
``torch.device``, on a machine whatever its GPUs (cupy is faked where it matters)."""

from __future__ import annotations

import types

import pytest

import dualflow
from dualflow import Device, cuda
from dualflow import device as device_module


def _fake_cupy(monkeypatch: pytest.MonkeyPatch, count: int | None) -> None:
    """A cupy whose runtime sees ``count`` devices (None: the driver call fails)."""

    def get_device_count() -> int:
        if count is None:
            raise RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
        return count

    runtime = types.SimpleNamespace(getDeviceCount=get_device_count)
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime))
    monkeypatch.setattr(device_module, "_cupy", lambda: fake)


def test_no_cupy_means_no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device_module, "_cupy", lambda: None)
    assert cuda.device_count() == 0 and cuda.is_available() is False


@pytest.mark.parametrize(("count", "available"), [(None, False), (0, False), (1, True), (4, True)])
def test_counts_what_cupy_sees(
    monkeypatch: pytest.MonkeyPatch, count: int, available: bool
) -> None:
    _fake_cupy(monkeypatch, count)
    assert cuda.device_count() == (count or 0)
    assert cuda.is_available() is available


def test_dualflow_cuda_is_the_module() -> None:
    assert dualflow.cuda is cuda and dualflow.cuda.is_available() == (cuda.device_count() > 0)


@pytest.mark.parametrize(
    ("args", "expected"),
    [(("cpu",), "cpu"), (("cuda",), "cuda:0"), (("cuda:1",), "cuda:1"), (("cuda", 2), "cuda:2")],
)
def test_device_module_is_callable_as_torch_device(args: tuple, expected: str) -> None:
    device = dualflow.device(*args)  # torch.device("cuda" if use_cuda else "cpu")
    assert isinstance(device, Device) and str(device) == expected
    assert dualflow.device(device) == device and dualflow.device().kind == "cpu"


def test_torch_device_moves_tensors_and_modules() -> None:
    device = dualflow.device("cpu")
    x = dualflow.randn(2, 3)
    layer = dualflow.nn.Linear(3, 1)
    assert x.to(device) is x and layer.to(device) is layer
    assert layer(x.to(device)).device == device
