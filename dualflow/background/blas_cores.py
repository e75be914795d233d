"""numpy's OpenBLAS kernel tables ("cores"): which one runs, which ones this CPU can run, and
switching between them in a running process.

A DYNAMIC_ARCH OpenBLAS (the scipy-openblas build numpy ships) holds one table of kernels and
blocking parameters per CPU family and picks one when it loads, by the CPU's model, or by
``OPENBLAS_CORETYPE``. Its pick is not always the fastest table on the machine (on a Zen 4 it
takes SkylakeX, whose float32 GEMMs ran 3-44% slower there than its Haswell ones: design notes,
"OpenBLAS's kernels chosen by measurement"). ``use_core`` makes the switch OpenBLAS makes at
load: ``gotoblas_dynamic_quit`` forgets the table, ``gotoblas_dynamic_init`` picks the one
``OPENBLAS_CORETYPE`` names and runs its ``init`` (its blocking parameters for this CPU's
caches). Its buffers are sized at build time for every table it holds. Only tables whose
instructions the CPU reports (``/proc/cpuinfo``'s flags) are offered: OpenBLAS does not check a
forced name. Other BLAS libraries, and builds without these functions, offer none.
"""

from __future__ import annotations

import ctypes
import functools
import os
from pathlib import Path

from dualflow.background.blas import library

CORE_ENV = "OPENBLAS_CORETYPE"
CORE_FLAGS = {
    "Haswell": ("avx2", "fma"),
    "Zen": ("avx2", "fma"),
    "SkylakeX": ("avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl"),
    "Cooperlake": ("avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl", "avx512_bf16"),
}
"""The tables worth timing on a machine with AVX2 (older families' kernels are never faster on
it), with the CPU flags their kernels use."""
_NAME = ("scipy_openblas_get_corename64_", "openblas_get_corename64_", "openblas_get_corename")


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The instruction-set flags the kernel reports for this CPU (empty where it does not).

    Example:
        >>> isinstance(cpu_flags(), frozenset)
        True
    """
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return frozenset()
    line = next((line for line in lines if line.startswith("flags")), "")
    return frozenset(line.partition(":")[2].split())


def core_name() -> str | None:
    """The name of the table OpenBLAS runs now ("Haswell", "SkylakeX", ...), or None without
    OpenBLAS.

    Example:
        >>> core_name() is None or not cores() or core_name() == cores()[0]
        True
    """
    lib = library()
    function = next((getattr(lib, n) for n in _NAME if hasattr(lib, n)), None)
    if function is None:
        return None
    function.restype = ctypes.c_char_p
    return function().decode()


def cores() -> tuple[str, ...]:
    """The tables ``use_core`` can switch to here: the running one, and each of ``CORE_FLAGS``
    the library holds and the CPU has every flag of (none without a switchable OpenBLAS).

    Example:
        >>> all(name in CORE_FLAGS or name == core_name() for name in cores())
        True
    """
    lib = library()
    if lib is None or not all(hasattr(lib, f) for f in _SWITCH) or core_name() is None:
        return ()
    flags = cpu_flags()
    held = [
        name
        for name, needs in CORE_FLAGS.items()
        if hasattr(lib, f"gotoblas_{name.upper()}") and flags.issuperset(needs)
    ]
    return tuple(dict.fromkeys([core_name(), *held]))


_SWITCH = ("gotoblas_dynamic_quit", "gotoblas_dynamic_init")


def use_core(name: str) -> bool:
    """Have OpenBLAS run the table ``name`` (one of ``cores()``) from its next call; True when it
    runs it. Call only while no other thread can be inside a BLAS call: between the two calls
    OpenBLAS has no table.

    Example:
        >>> before = core_name()
        >>> before is None or use_core(before)
        True
    """
    if name not in cores():
        return False
    lib = library()
    before = os.environ.get(CORE_ENV)
    os.environ[CORE_ENV] = name  # what dynamic_init reads, as at load
    try:
        lib.gotoblas_dynamic_quit()
        lib.gotoblas_dynamic_init()
    finally:  # child processes keep their own choice
        if before is None:
            del os.environ[CORE_ENV]
        else:
            os.environ[CORE_ENV] = before
    return core_name() == name
