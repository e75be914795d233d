"""Process memory tuning: keep freed large arrays in the heap instead of returning them to the OS.

glibc serves large allocations with fresh ``mmap`` pages and trims freed heap memory, so every
new multi-megabyte temporary pays page faults; measured on the MLP step this doubled step time.
Raising the mmap and trim thresholds (as PyTorch's caching allocator does in its own way) lets
numpy reuse memory. ``DUALFLOW_MALLOC_TUNING=0`` turns this off.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

from dualflow._config import env_flag

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD = 32 * 2**20  # glibc's maximum on 64-bit: larger arrays still get mmap
_TRIM_THRESHOLD = 1 * 2**30


def tune_malloc() -> bool:
    """Apply the thresholds on Linux/glibc (once); returns whether they were applied.

    Example:
        >>> isinstance(tune_malloc(), bool)
        True
    """
    if not env_flag("DUALFLOW_MALLOC_TUNING", default=True) or not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (e.g. musl)
        return False
    ok = mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD) == 1
    return mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD) == 1 and ok
