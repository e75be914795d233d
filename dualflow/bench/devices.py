"""The bench's ``--device``: check a device is usable, synchronize it, measure its peak memory.

A CUDA device runs kernels asynchronously, so the harness reads the clock only after
``synchronizer(device)()``; its peak memory is the high-water mark of bytes held from cupy's
memory pool while one step runs, and what a step leaves held is the pool's bytes it took and
did not give back. cupy is imported only when a CUDA device is asked for.
"""

from __future__ import annotations

import platform
from collections.abc import Callable
from typing import Any

from dualflow.device import Device
from dualflow.errors import DeviceError


def resolve_device(spec: str) -> Device:
    """The Device named by ``--device``, checked to be usable now.

    Raises:
        DeviceError: an unknown name, cupy missing, or no such CUDA device visible.

    Example:
        >>> resolve_device("cpu")
        Device('cpu')
    """
    device = Device(spec)
    if device.kind == "cpu":
        return device
    try:
        # DeviceError naming the extra when cupy is missing, or the devices cupy can see
        cupy = device.xp
    except DeviceError:
        raise
    except Exception as exc:  # a broken install (missing CUDA libraries) fails at import
        raise DeviceError(f"device {device}: cupy failed to import ({exc})") from None
    cupy.cuda.Device(device.index).use()  # ops that allocate without a device use this one
    return device


def synchronizer(device: Device) -> Callable[[], None]:
    """A function that waits until ``device`` has finished its queued work (a no-op on CPU).

    Example:
        >>> synchronizer(Device("cpu"))() is None
        True
    """
    if device.kind == "cpu":
        return lambda: None
    return device.xp.cuda.Device(device.index).synchronize


def gpu_peak_memory(fn: Callable[[], Any], device: Device) -> int:
    """Peak bytes held from cupy's memory pool while ``fn`` runs, above what was held before.

    cupy's pool keeps freed blocks cached, so its ``total_bytes()`` never drops and
    ``used_bytes()`` is only a snapshot; a ``cupy.cuda.MemoryHook`` sees every block the pool
    hands out and takes back, so the running sum's maximum is the true high-water mark of
    in-use pool memory. Memory outside the pool (the CUDA context, library handles) is not seen.

    Example:
        >>> gpu_peak_memory(lambda: None, Device("cuda:0"))  # doctest: +SKIP
        0
    """
    return max(0, _counted(fn, device).peak)


def gpu_held_memory(fn: Callable[[], Any], device: Device) -> int:
    """Bytes ``fn`` took from cupy's memory pool and had not given back when it returned (what
    it leaves held), counted by the same hook as ``gpu_peak_memory``.

    Example:
        >>> gpu_held_memory(lambda: None, Device("cuda:0"))  # doctest: +SKIP
        0
    """
    return max(0, _counted(fn, device).held)


def _counted(fn: Callable[[], Any], device: Device) -> Any:
    """Run ``fn`` with a hook counting the pool's blocks; the hook (``held``, ``peak``)."""
    sync = synchronizer(device)
    hook = _high_water_hook(device.xp)
    sync()  # earlier queued work must not free blocks while the hook is counting
    with hook:
        fn()
        sync()
    return hook


def _high_water_hook(cupy: Any) -> Any:
    class HighWater(cupy.cuda.MemoryHook):
        name = "dualflow-bench-high-water"

        def __init__(self) -> None:
            self.held = self.peak = 0

        def malloc_postprocess(self, **kwargs: Any) -> None:
            if kwargs.get("mem_ptr"):  # 0 when the allocation failed
                self.held += kwargs["mem_size"]
                self.peak = max(self.peak, self.held)

        def free_postprocess(self, **kwargs: Any) -> None:
            # blocks allocated before the hook was entered may be freed too: held can go
            # below zero, which keeps the peak relative to what was held at the start
            self.held -= kwargs["mem_size"]

    return HighWater()


def describe(device: Device) -> str:
    """A short description of the device for the JSON metadata.

    Example:
        >>> describe(Device("cpu")) == f"cpu ({platform.machine()})"
        True
    """
    if device.kind == "cpu":
        return f"cpu ({platform.machine()})"
    props = device.xp.cuda.runtime.getDeviceProperties(device.index)
    name = props["name"]
    return f"{device} ({name.decode() if isinstance(name, bytes) else name})"
