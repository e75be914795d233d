"""Devices: ``Device("cpu" | "cuda:N")``, the array module of an array, moving arrays, DLPack.

Everything in dualflow computes through ``xp`` (numpy or cupy) chosen here, so one op
implementation serves both; cupy is imported only when a CUDA device is asked for.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import numpy as np

from dualflow.errors import DeviceError, with_location

INSTALL_CUPY = "pip install 'dualflow[cuda12]'"
# DLPack device types (dlpack.h, DLDeviceType) that numpy or cupy can import.
DLPACK_CPU = (1,)  # kDLCPU
DLPACK_CUDA = (2, 13)  # kDLCUDA, kDLCUDAManaged
_CHECKED: set[int] = set()  # CUDA indices already found to exist (Device.xp is on hot paths)


def _cupy() -> ModuleType | None:
    try:
        import cupy  # noqa: PLC0415 - optional dependency, imported on demand
    except ImportError:
        return None
    return cupy


def _parse(spec: Any) -> tuple[str, int]:
    """``(kind, index)`` of a device spec, or a DeviceError naming the spec and the fix."""
    text = spec.strip().lower() if isinstance(spec, str) else None
    if text is not None:
        kind, colon, index = text.partition(":")
        number = index.isascii() and index.isdigit()
        if kind == "cpu" and (not colon or index == "0"):
            return "cpu", 0
        if kind in ("cuda", "gpu") and (not colon or number):
            return "cuda", int(index or 0)
    given = spec if isinstance(spec, str) else f"{type(spec).__name__} {spec!r}"
    raise DeviceError(
        with_location(
            f"unknown device {given!r}; use 'cpu', 'cuda' or 'cuda:N' with N a device number "
            "(e.g. 'cuda:0'; 'gpu:N' means the same)"
        )
    )


class Device:
    """Where arrays live: ``Device("cpu")`` or ``Device("cuda:0")`` (case and spaces ignored).

    Example:
        >>> Device("cpu")
        Device('cpu')
        >>> Device("cuda:1").index, Device(" GPU:2 ")
        (1, Device('cuda:2'))
    """

    __slots__ = ("index", "kind")

    def __init__(self, spec: str | Device = "cpu") -> None:
        if isinstance(spec, Device):
            self.kind, self.index = spec.kind, spec.index
            return
        self.kind, self.index = _parse(spec)

    @property
    def xp(self) -> ModuleType:
        """The array module (numpy or cupy) for this device.

        Raises:
            DeviceError: cupy is not installed, or this CUDA device is not visible.
        """
        if self.kind == "cpu":
            return np
        cupy = _cupy()
        if cupy is None:
            raise DeviceError(f"device {self} needs cupy; install the extra: {INSTALL_CUPY}")
        if self.index not in _CHECKED:
            _check_visible(cupy, self)
        return cupy

    @property
    def type(self) -> str:
        """``"cpu"`` or ``"cuda"``: PyTorch's name for ``kind`` (``x.device.type == "cuda"``)."""
        return self.kind

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) and (self.kind, self.index) == (other.kind, other.index)

    def __hash__(self) -> int:
        return hash((self.kind, self.index))

    def __str__(self) -> str:
        return "cpu" if self.kind == "cpu" else f"cuda:{self.index}"

    def __repr__(self) -> str:
        return f"Device({str(self)!r})"


def _check_visible(cupy: ModuleType, device: Device) -> None:
    try:
        count = cupy.cuda.runtime.getDeviceCount()
        reason = ""
    except Exception as exc:  # CUDARuntimeError: no driver or no GPU, which means "none"
        count, reason = 0, f" ({type(exc).__name__}: {exc})"
    if device.index >= count:
        raise DeviceError(
            f"device {device} is not available: cupy sees {count} CUDA device(s){reason}"
        )
    _CHECKED.add(device.index)


CPU = Device("cpu")


def get_array_module(*arrays: Any) -> ModuleType:
    """Return cupy if any argument is a cupy array, else numpy.

    Example:
        >>> get_array_module(np.zeros(2)) is np
        True
    """
    for array in arrays:
        if type(array).__module__.startswith("cupy"):
            return _cupy()  # type: ignore[return-value]
    return np


def device_of(array: Any) -> Device:
    """The Device an array lives on.

    Example:
        >>> device_of(np.zeros(1))
        Device('cpu')
    """
    if isinstance(array, np.ndarray | np.generic):
        return CPU
    device = getattr(array, "device", None)
    if isinstance(device, Device):  # a payload that knows its device (vmap's BatchedArray)
        return device
    if device is not None and type(array).__module__.startswith("cupy"):
        return Device(f"cuda:{device.id}")
    return CPU


def send(array: Any, device: Device | str) -> Any:
    """Move an array to ``device``: the same array when it is already there (zero-copy).

    Example:
        >>> a = np.ones(2); send(a, "cpu") is a
        True
    """
    device = Device(device)
    if device_of(array) == device:
        return array
    if device.kind == "cpu":
        return array.get()
    cupy = device.xp
    with cupy.cuda.Device(device.index):
        if type(array).__module__.startswith("cupy"):
            # asarray would hand back the array on its old GPU; copy() allocates on this one
            return array.copy()
        return cupy.asarray(array)


def array_from_dlpack(obj: Any) -> Any:
    """A numpy or cupy array sharing memory with ``obj`` (any object with ``__dlpack__``).

    ``obj.__dlpack_device__()`` picks the importer: host memory goes to ``numpy.from_dlpack``,
    CUDA memory to ``cupy.from_dlpack``.

    Raises:
        TypeError: ``obj`` does not speak DLPack.
        DeviceError: its memory is on a device neither numpy nor cupy can read.

    Example:
        >>> a = np.arange(3.0); b = array_from_dlpack(a)
        >>> np.shares_memory(a, b), b.dtype
        (True, dtype('float64'))
    """
    if not (hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__")):
        raise TypeError(
            f"from_dlpack: {type(obj).__name__} has no __dlpack__/__dlpack_device__; pass a "
            "numpy, cupy or torch array (or a dualflow Tensor)"
        )
    kind, index = (int(v) for v in obj.__dlpack_device__())
    if kind in DLPACK_CPU:
        return np.from_dlpack(obj)
    if kind in DLPACK_CUDA:
        cupy = Device(f"cuda:{index}").xp
        with cupy.cuda.Device(index):
            return cupy.from_dlpack(obj)
    raise DeviceError(
        with_location(
            f"from_dlpack: {type(obj).__name__} lives on DLPack device type {kind} (index "
            f"{index}); dualflow reads host memory (type 1) and CUDA memory (types 2, 13)"
        )
    )


class _CallableModule(ModuleType):
    """This module, callable as ``Device``: PyTorch's ``torch.device("cuda" if ... else "cpu")``.

    ``dualflow.device`` names this submodule, so the module itself forwards calls to ``Device``.
    """

    def __call__(self, spec: str | Device = "cpu", index: int | None = None) -> Device:
        return Device(spec if index is None else f"{spec}:{index}")


sys.modules[__name__].__class__ = _CallableModule
