"""Devices: ``Device("cpu" | "cuda:N")``, the array module of an array, and moving arrays.

Everything in dualflow computes through ``xp`` (numpy or cupy) chosen here, so one op
implementation serves both; cupy is imported only when a CUDA device is asked for.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from dualflow.errors import DeviceError, with_location


def _cupy() -> ModuleType | None:
    try:
        import cupy  # noqa: PLC0415 - optional dependency, imported on demand
    except ImportError:
        return None
    return cupy


class Device:
    """Where arrays live: ``Device("cpu")`` or ``Device("cuda:0")``.

    Example:
        >>> Device("cpu")
        Device('cpu')
        >>> Device("cuda:1").index
        1
    """

    __slots__ = ("index", "kind")

    def __init__(self, spec: str | Device = "cpu") -> None:
        if isinstance(spec, Device):
            self.kind, self.index = spec.kind, spec.index
            return
        text = str(spec).strip().lower()
        kind, _, index = text.partition(":")
        if kind == "cpu" and not index:
            self.kind, self.index = "cpu", 0
        elif kind in ("cuda", "gpu") and (not index or index.isdigit()):
            self.kind, self.index = "cuda", int(index or 0)
        else:
            raise DeviceError(
                with_location(f"unknown device {spec!r}; use 'cpu' or 'cuda:N' (e.g. 'cuda:0')")
            )

    @property
    def xp(self) -> ModuleType:
        """The array module (numpy or cupy) for this device."""
        if self.kind == "cpu":
            return np
        cupy = _cupy()
        if cupy is None:
            raise DeviceError(
                f"device {self} needs cupy; install the extra: pip install 'dualflow[cuda12]'"
            )
        return cupy

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) and (self.kind, self.index) == (other.kind, other.index)

    def __hash__(self) -> int:
        return hash((self.kind, self.index))

    def __str__(self) -> str:
        return "cpu" if self.kind == "cpu" else f"cuda:{self.index}"

    def __repr__(self) -> str:
        return f"Device({str(self)!r})"


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
    if device is not None and type(array).__module__.startswith("cupy"):
        return Device(f"cuda:{device.id}")
    return CPU


def send(array: Any, device: Device | str) -> Any:
    """Move an array to ``device`` (no copy when it is already there).

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
        return cupy.asarray(array)
