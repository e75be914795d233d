"""The CPU's cache sizes as the operating system reports them (Linux's sysfs), for kernels that
size their blocks by a core's cache rather than by a constant measured on one machine."""

from __future__ import annotations

import functools
from pathlib import Path

CACHES = Path("/sys/devices/system/cpu/cpu0/cache")
DEFAULT_L2 = 1 << 20
"""A core's L2 where the OS does not say (not Linux, or no sysfs): 1 MiB, a recent x86 core's."""

BOUNDS = (64 << 10, 64 << 20)
"""Sizes outside these are not believed (a misread file): the default stands instead."""


def parse_size(text: str) -> int | None:
    """Bytes of a sysfs cache size such as ``"2048K"`` or ``"1M"``; None where it is not one.

    Example:
        >>> parse_size("2048K"), parse_size("1M\\n"), parse_size("512"), parse_size("big")
        (2097152, 1048576, 512, None)
    """
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    digits = text[:-1] if scale > 1 else text
    return int(digits) * scale if digits.isdigit() else None


@functools.cache
def l2_bytes() -> int:
    """One core's L2 cache in bytes (cpu0's unified level-2 cache in sysfs), else ``DEFAULT_L2``.

    Example:
        >>> BOUNDS[0] <= l2_bytes() <= BOUNDS[1]
        True
    """
    try:
        for index in sorted(CACHES.glob("index*")):
            if (index / "level").read_text().strip() == "2":
                size = parse_size((index / "size").read_text())
                if size is not None and BOUNDS[0] <= size <= BOUNDS[1]:
                    return size
    except OSError:
        pass
    return DEFAULT_L2
