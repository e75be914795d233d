"""Atomic reads and updates of int64 arrays inside numba kernels, and a bounded wait on a flag.

Threads that share counters or flags across ``nogil`` kernels (``lockstep``'s parts, a caller
waiting for a worker's part in ``cpu_threads.run_parts``) read them with ``atomic_load``, which
a compiler never hoists out of a waiting loop, and update them with ``atomic_add``.
"""

from __future__ import annotations

import hashlib
import platform
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from dualflow.kernels.base.numba_cache import code_fingerprint, in_kernels_store


def _item_pointer(context: Any, builder: Any, array_type: Any, array: Any, index: Any) -> Any:
    ary = context.make_array(array_type)(context, builder, array)
    return cgutils.get_item_pointer(context, builder, array_type, ary, [index], wraparound=False)


@intrinsic
def atomic_add(typingctx: Any, array: Any, index: Any, value: Any) -> Any:
    """``array[index] += value`` as one atomic read-modify-write that orders every memory access
    around it (``seq_cst``); returns the value before. ``array`` is a 1-D int64 array.

    Example:
        >>> @numba.njit
        ... def bump(a):
        ...     return atomic_add(a, 0, 5), a[0]
        >>> bump(np.ones(1, np.int64))
        (1, 6)
    """
    if not (isinstance(array, types.Array) and array.dtype == types.int64 and array.ndim == 1):
        return None
    signature = types.int64(array, types.intp, types.int64)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        pointer = _item_pointer(context, builder, sig.args[0], args[0], args[1])
        value = context.cast(builder, args[2], sig.args[2], types.int64)
        return builder.atomic_rmw("add", pointer, value, "seq_cst")

    return signature, codegen


@intrinsic
def atomic_load(typingctx: Any, array: Any, index: Any) -> Any:
    """``array[index]`` read atomically (``acquire``: what the writer stored before its atomic
    update is visible after), never hoisted out of a waiting loop as a plain read may be.

    Example:
        >>> @numba.njit
        ... def read(a):
        ...     return atomic_load(a, 1)
        >>> read(np.arange(3, dtype=np.int64))
        1
    """
    if not (isinstance(array, types.Array) and array.dtype == types.int64 and array.ndim == 1):
        return None
    signature = types.int64(array, types.intp)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        pointer = _item_pointer(context, builder, sig.args[0], args[0], args[1])
        return builder.load_atomic(pointer, "acquire", 8)

    return signature, codegen


@intrinsic
def cpu_relax(typingctx: Any) -> Any:
    """A spin-wait hint (x86's ``pause``; nothing elsewhere): a thread watching a word gives the
    core's other hardware thread, which may be doing the work it waits for, its resources.

    Example:
        >>> import numba
        >>> numba.njit(lambda: cpu_relax())()
    """

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        if platform.machine() in ("x86_64", "AMD64", "i686"):
            pause = builder.module.declare_intrinsic(
                "llvm.x86.sse2.pause", fnty=ir.FunctionType(ir.VoidType(), [])
            )
            builder.call(pause, [])
        return context.get_dummy_value()

    return types.none(), codegen


# A wait's bound in loads of the flag: ~0.1-0.5 ms at the ~0.25-1 ns an uncontended load takes.
# It only bounds the time a waiter keeps its core when the other thread is late (a busy
# machine); past it the waiter sleeps on its event as before.
SPIN_LOADS = 1 << 19


def _wait_for_flag(flag: np.ndarray, loads: int) -> bool:
    """Whether ``flag[0]`` became nonzero within ``loads`` atomic reads (compiled ``nogil``:
    the thread that sets it takes the GIL meanwhile without waiting).

    Example:
        >>> wait_for_flag(np.ones(1, np.int64), 4), wait_for_flag(np.zeros(1, np.int64), 4)
        (True, False)
    """
    for _ in range(loads):  # noqa: SIM110 - a plain loop: numba compiles it to a few instructions
        if atomic_load(flag, 0) != 0:
            return True
    return False


FINGERPRINT = hashlib.sha256(
    b"".join(
        code_fingerprint(f.__code__)
        for f in (atomic_add._defn, atomic_load._defn, _item_pointer, _wait_for_flag)
    )
).hexdigest()[:16]
"""A digest of the intrinsics' code, for the stems of kernels that inline them (a kernel's cache
key hashes its own bytecode only)."""

wait_for_flag = numba.njit(nogil=True, cache=False)(_wait_for_flag)
in_kernels_store(wait_for_flag, f"k_wait_for_flag_{FINGERPRINT}")
