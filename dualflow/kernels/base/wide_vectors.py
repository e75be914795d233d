"""Loops at the CPU's widest vectors: ``wide_vectors()``, called first in a numba kernel, asks
LLVM to vectorize that kernel's loops with 512-bit registers where the CPU has AVX-512.

LLVM's tuning for Intel's AVX-512 cores (Skylake-X to Sapphire Rapids) prefers 256-bit vectors,
a choice made when 512-bit instructions lowered the clock of the whole core. For loops that
compute more than they move that costs time: a fused ``tanh`` chain took 0.78 ns an element at
256 bits and 0.66 at 512 on one core of an AVX-512 Xeon guest (design notes, "Flat kernels at
512 bits"). Memory-bound loops lose a little instead (an SGD update over 784K elements, 246
against 254-265 us: every 64-byte access of an array 16 bytes off a cache line splits two
lines), and setting the preference process-wide (numba's ``CPU_FEATURES``) also widened short
loops whose remainders then ran scalar. So it is a per-kernel attribute, which the flat fused
kernels take where their measured work exceeds a copy's (``kernel_work.compute_bound``).

The attribute changes which vector instructions run, never an operation's rounding: the loops
have no fast-math flags, so every element is computed by the same IEEE operations in the same
order at any width (and on CPUs without AVX-512 the attribute changes nothing).
"""

from __future__ import annotations

import hashlib
from typing import Any

from numba.core import types
from numba.extending import intrinsic

from dualflow.kernels.base.numba_cache import code_fingerprint

ATTRIBUTE = '"prefer-vector-width"="512"'


def _wide_vectors_typer(typingctx: Any) -> Any:
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        # llvmlite's attribute set names only flag attributes; a key-value one is written
        # through the set itself, and the function's IR prints it as it is
        set.add(builder.function.attributes, ATTRIBUTE)
        return context.get_dummy_value()

    return types.none(), codegen


wide_vectors = intrinsic(_wide_vectors_typer)
wide_vectors.__doc__ = """Mark the calling numba function's loops for the widest vectors.

    Example:
        >>> import numba, numpy as np
        >>> @numba.njit
        ... def double(a):
        ...     wide_vectors()
        ...     for i in range(a.size):
        ...         a[i] *= 2
        >>> a = np.ones(40, np.float32); double(a); float(a.sum())
        80.0
    """
__test__ = {"wide_vectors": wide_vectors.__doc__}  # doctest does not look into intrinsic objects

FINGERPRINT = hashlib.sha256(
    code_fingerprint(_wide_vectors_typer.__code__) + ATTRIBUTE.encode()
).hexdigest()[:16]
IMPORT = f"from dualflow.kernels.base.wide_vectors import wide_vectors  # {FINGERPRINT}"
"""The line a generated flat kernel imports ``wide_vectors`` with (its fingerprint: a changed
attribute is a new kernel source, never stale cached machine code)."""
