"""numpy's OpenBLAS thread pool, reached through the library numpy loaded: its thread count,
and idle threads that sleep at once instead of spinning.

OpenBLAS's threads spin for 2**28 cycles (~0.1 s) after each multi-threaded call before they
sleep, so a fused kernel split over both cores right after a GEMM shares them with a spinning
thread (docs/design-notes.md, "One thread pool (issue 38)": 1.18 ms against 0.70 ms).
The spin is read from ``OPENBLAS_THREAD_TIMEOUT`` when OpenBLAS starts its threads; numpy
started them before dualflow could set it, so ``sleep_when_idle`` sets it, has OpenBLAS read its
environment again and ends its threads, which the next BLAS call starts again with it. Other
BLAS libraries (MKL, Accelerate) lack these functions: then nothing changes.
"""

from __future__ import annotations

import ctypes
import functools
import os
from pathlib import Path
from typing import Any

TIMEOUT_ENV = "OPENBLAS_THREAD_TIMEOUT"
SLEEP_AT_ONCE = "4"  # OpenBLAS's least: 2**4 cycles of looking for work, then sleep
OPENBLAS_SPIN = "28"  # OpenBLAS's own default: 2**28 cycles (~0.1 s) before its threads sleep
_SET = ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_")
_SET += ("openblas_set_num_threads",)
_GET = ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_")
_GET += ("openblas_get_num_threads",)
_state = {"sleeping": False}


@functools.cache
def library() -> Any:
    """The OpenBLAS library numpy loaded (a ``ctypes.CDLL``), or None when numpy uses another
    BLAS or none can be found.

    Example:
        >>> lib = library()
        >>> lib is None or _function(lib, _GET) is not None
        True
    """
    import numpy  # noqa: F401, PLC0415  # loads its BLAS: the library is then mapped

    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    paths = {line.split()[-1] for line in maps.splitlines() if "openblas" in line.lower()}
    for path in sorted(p for p in paths if p.startswith("/")):
        try:
            lib = ctypes.CDLL(path)  # already loaded: the same handle numpy uses
        except OSError:
            continue
        if _function(lib, _GET) is not None:
            return lib
    return None


def _function(lib: Any, names: tuple[str, ...]) -> Any:
    for name in names:
        function = getattr(lib, name, None)
        if function is not None:
            return function
    return None


def get_threads() -> int | None:
    """OpenBLAS's thread count now, or None without OpenBLAS.

    Example:
        >>> get_threads() is None or get_threads() >= 1
        True
    """
    lib = library()
    return None if lib is None else int(_function(lib, _GET)())


def set_threads(count: int) -> bool:
    """Have OpenBLAS's GEMMs use ``count`` threads; False without OpenBLAS.

    Example:
        >>> before = get_threads()
        >>> set_threads(1) == (before is not None)
        True
        >>> _ = before is None or set_threads(before)
    """
    lib = library()
    if lib is None:
        return False
    _function(lib, _SET)(ctypes.c_int(count))
    return True


def sleep_when_idle() -> bool:
    """Make OpenBLAS's idle threads sleep at once (once a process; False when the user set
    ``OPENBLAS_THREAD_TIMEOUT``, or without OpenBLAS's functions for it). Call only while no
    other thread can be inside a BLAS call: OpenBLAS ends its threads here.

    Example:
        >>> sleep_when_idle() in (True, False)
        True
    """
    if _state["sleeping"] or TIMEOUT_ENV in os.environ:
        return _state["sleeping"]
    _state["sleeping"] = set_idle_spin(SLEEP_AT_ONCE)
    return _state["sleeping"]


def owns_idle_spin() -> bool:
    """Whether dualflow set how long OpenBLAS's idle threads spin (``sleep_when_idle`` took
    effect): only then may ``set_idle_spin`` change it again.

    Example:
        >>> owns_idle_spin() in (True, False)
        True
    """
    return _state["sleeping"]


def set_idle_spin(exponent: str) -> bool:
    """Have OpenBLAS's idle threads look for work for ``2**exponent`` cycles before they sleep,
    from its next call: it reads ``OPENBLAS_THREAD_TIMEOUT`` again (removed at once after: child
    processes keep their default) and ends its threads, which its next call starts reading it.
    False without OpenBLAS's functions for it. Call only while no other thread can be inside a
    BLAS call.

    Example:
        >>> set_idle_spin(SLEEP_AT_ONCE) if owns_idle_spin() else True
        True
    """
    lib = library()
    read_env = getattr(lib, "openblas_read_env", None)
    shutdown = getattr(lib, "blas_thread_shutdown_", None)
    if read_env is None or shutdown is None:
        return False
    os.environ[TIMEOUT_ENV] = exponent
    try:
        read_env()
    finally:
        del os.environ[TIMEOUT_ENV]  # OpenBLAS copied it
    shutdown()  # its threads end; the next BLAS call starts them reading the new timeout
    return True
