"""``dualflow.cuda``: PyTorch's ``torch.cuda.is_available()`` and ``device_count()``.

Ported programs pick their device with ``torch.cuda.is_available()``; here a CUDA device is
available when cupy is installed and sees at least one GPU (the driver is asked once per call).
"""

from __future__ import annotations

from dualflow import device as _devices  # _cupy looked up at call time (tests replace it)


def device_count() -> int:
    """The number of CUDA devices cupy sees (0 without cupy, a driver or a GPU).

    Example:
        >>> device_count() >= 0
        True
    """
    cupy = _devices._cupy()
    if cupy is None:
        return 0
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # CUDARuntimeError: no driver or no GPU, which means "none"
        return 0


def is_available() -> bool:
    """Whether ``Device("cuda")`` can be used: cupy is installed and sees a GPU.

    Example:
        >>> is_available() == (device_count() > 0)
        True
    """
    return device_count() > 0


__all__ = ["device_count", "is_available"]
