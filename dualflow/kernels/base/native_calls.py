"""Addresses inside numba kernels: pointers from integers, calls through a function's address,
Linux system calls and atomic stores, for threads that run kernels without the GIL.

``native_crew``'s threads are started by ``pthread_create`` and never enter the interpreter: they
find their work as numbers in shared memory (an entry point's address, a block of operand
addresses) and sleep on a futex. These intrinsics are what that needs and numba lacks: an
address as a ``void*`` (``as_voidptr``, for ``numba.carray``), an array element's address
(``address_of``), a call of a compiled kernel's C entry point (``call_entry``), a call of libc's
``syscall`` by its address (``syscall``: futex and gettid) and an ordered store (``atomic_store``).
"""

from __future__ import annotations

import hashlib
from typing import Any

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from dualflow.kernels.base.numba_cache import code_fingerprint

_I64 = ir.IntType(64)
BLOCK_TYPE = types.Array(types.int64, 1, "C")
"""The one argument of every entry point ``call_entry`` calls: a C-ordered 1-D int64 array."""


def _item_pointer(context: Any, builder: Any, array_type: Any, array: Any, index: Any) -> Any:
    ary = context.make_array(array_type)(context, builder, array)
    return cgutils.get_item_pointer(context, builder, array_type, ary, [index], wraparound=False)


def _int64_array(array: Any) -> bool:
    return isinstance(array, types.Array) and array.dtype == types.int64 and array.ndim == 1


@intrinsic
def as_voidptr(typingctx: Any, address: Any) -> Any:
    """An integer address as a ``void*`` (``numba.carray(as_voidptr(a), shape, dtype)``).

    Example:
        >>> import numba, numpy as np
        >>> @numba.njit
        ... def first(a, address):
        ...     return numba.carray(as_voidptr(address), (1,), np.int64)[0]
        >>> x = np.array([7], np.int64)
        >>> first(x, x.ctypes.data)
        7
    """
    if not isinstance(address, types.Integer):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        value = context.cast(builder, args[0], sig.args[0], types.int64)
        return builder.inttoptr(value, ir.IntType(8).as_pointer())

    return types.voidptr(address), codegen


@intrinsic
def address_of(typingctx: Any, array: Any, index: Any) -> Any:
    """The address of ``array[index]`` (a 1-D array of any dtype) as an int64.

    Example:
        >>> import numba, numpy as np
        >>> x = np.zeros(3, np.int64)
        >>> numba.njit(lambda a: address_of(a, 2))(x) == x.ctypes.data + 16
        True
    """
    if not (isinstance(array, types.Array) and array.ndim == 1):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        pointer = _item_pointer(context, builder, sig.args[0], args[0], args[1])
        return builder.ptrtoint(pointer, _I64)

    return types.int64(array, types.intp), codegen


@intrinsic
def call_entry(typingctx: Any, address: Any, block: Any) -> Any:
    """Call the C entry point at ``address`` of a kernel compiled for one ``BLOCK_TYPE``
    argument (numba's C wrapper of it, ``native_crew.entry_address``) with ``block``.

    Example:
        >>> import numba, numpy as np
        >>> from dualflow.kernels.base.native_crew import entry_address
        >>> @numba.njit
        ... def bump(block):
        ...     block[0] += 1
        >>> bump(np.zeros(1, np.int64))
        >>> b = np.zeros(1, np.int64)
        >>> numba.njit(lambda a, b: call_entry(a, b))(entry_address(bump), b); b[0]
        np.int64(1)
    """
    if not (isinstance(address, types.Integer) and block == BLOCK_TYPE):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        returns = context.get_value_type(types.none)
        entry_type = ir.FunctionType(returns, [context.get_value_type(sig.args[1])])
        target = context.cast(builder, args[0], sig.args[0], types.int64)
        builder.call(builder.inttoptr(target, entry_type.as_pointer()), [args[1]])
        return context.get_dummy_value()

    return types.none(address, block), codegen


@intrinsic
def syscall(typingctx: Any, address: Any, number: Any, a: Any, b: Any, c: Any) -> Any:
    """``syscall(number, a, b, c, 0, 0)`` through libc's ``syscall`` at ``address`` (integer
    arguments only: on x86-64 and aarch64 its fixed registers are those of a plain call).

    Example:
        >>> import ctypes, numba, platform, threading
        >>> from dualflow.kernels.base.native_crew import SYSCALLS
        >>> at = ctypes.cast(ctypes.CDLL(None).syscall, ctypes.c_void_p).value
        >>> gettid = SYSCALLS.get(platform.machine(), (0, -1))[1]  # -1: no such call (ENOSYS)
        >>> numba.njit(lambda a, n: syscall(a, n, 0, 0, 0))(at, gettid) in (
        ...     threading.get_native_id(), -1)
        True
    """
    if not all(isinstance(t, types.Integer) for t in (address, number, a, b, c)):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        values = [context.cast(builder, v, t, types.int64) for v, t in zip(args, sig.args)]
        call_type = ir.FunctionType(_I64, [_I64] * 6)
        target = builder.inttoptr(values[0], call_type.as_pointer())
        zero = ir.Constant(_I64, 0)
        return builder.call(target, [*values[1:], zero, zero])

    return types.int64(address, number, a, b, c), codegen


@intrinsic
def atomic_store(typingctx: Any, array: Any, index: Any, value: Any) -> Any:
    """``array[index] = value`` as one ordered store (``seq_cst``) of a 1-D int64 array.

    Example:
        >>> import numba, numpy as np
        >>> x = np.zeros(2, np.int64)
        >>> numba.njit(lambda a: atomic_store(a, 1, 5))(x); x.tolist()
        [0, 5]
    """
    if not (_int64_array(array) and isinstance(value, types.Integer)):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        pointer = _item_pointer(context, builder, sig.args[0], args[0], args[1])
        stored = context.cast(builder, args[2], sig.args[2], types.int64)
        builder.store_atomic(stored, pointer, "seq_cst", 8)
        return context.get_dummy_value()

    return types.none(array, index, value), codegen


FINGERPRINT = hashlib.sha256(
    b"".join(
        code_fingerprint(f._defn.__code__)
        for f in (as_voidptr, address_of, call_entry, syscall, atomic_store)
    )
    + code_fingerprint(_item_pointer.__code__)
).hexdigest()[:16]
"""A digest of the intrinsics' code, for the stems of kernels that inline them."""
