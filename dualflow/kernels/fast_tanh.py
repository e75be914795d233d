"""float32 ``tanh`` as one branch-free rational function that LLVM vectorizes, for every CPU path.

numba's libm ``tanhf`` is ~10x slower than numpy's SIMD loop; ``tanh_f32`` (selects, no branches,
exactly rounded float32 operations and ``fma``) vectorizes with AVX-512. Eager numpy ops, the
blocked evaluator (``numpy_tanh``) and fused numba kernels (inlining ``tanh_f32``) all run it, so
compiled results stay bit-identical to eager. Error: at most ``MAX_ULP`` ulp from the correctly
rounded tanh, measured over all 2^32 float32 inputs (tests/kernels/test_fast_tanh.py); unlike
numpy's it is not exactly monotone (a larger input may give up to ``MAX_STEP_BACK`` ulp less).
"""

from __future__ import annotations

import functools
import hashlib
import math
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from dualflow.disk_cache import open_store
from dualflow.kernels import numba_cache
from dualflow.kernels.cpu_threads import parts_for, run_parts, split

MAX_ULP = 5
"""The largest distance, in float32 ulps, from float64 ``np.tanh`` rounded to float32."""
MAX_STEP_BACK = 7
"""The most ulps by which tanh of a float32 may fall below tanh of the float32 before it."""

# tanh(x) = x * P(x^2) / Q(x^2) on |x| < SATURATE: a minimax fit of tanh(x)/x (relative error
# 0.36 ulp, 0.49 with float32 coefficients) whose coefficients are all positive, so Horner's
# rule has no cancellation; P(0) = Q(0) = 1 makes it exactly x where x^2 is below 2^-24.
_P = tuple(np.float32(v) for v in ("0.13383268", "0.003498148", "2.0647229e-05", "1.3400205e-08"))
_Q = tuple(np.float32(v) for v in ("0.4671659", "0.025886985", "0.00032896482", "7.796738e-07"))
_P1, _P2, _P3, _P4 = _P
_Q1, _Q2, _Q3, _Q4 = _Q
SATURATE = np.float32(9.010913848876953)  # the least x whose rounded tanh is 1.0
_ONE = np.float32(1.0)
# int16 and uint16 inputs run numpy's float32 loop too (bool and 8-bit ints its float16 one)
FLOAT32_LOOP = frozenset(np.dtype(d) for d in ("float32", "int16", "uint16"))
MIN_PART = 1 << 18  # elements per thread below which one thread is faster (hand-off ~20-50 us)


@intrinsic
def fma32(typingctx: Any, a: Any, b: Any, c: Any) -> Any:
    """``a * b + c`` rounded once (LLVM's ``llvm.fma.f32``; one instruction, vectorized)."""
    if not a == b == c == types.float32:
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        t = args[0].type
        fn = builder.module.declare_intrinsic("llvm.fma", [t], ir.FunctionType(t, [t, t, t]))
        return builder.call(fn, args)

    return types.float32(types.float32, types.float32, types.float32), codegen


@numba.njit(inline="always", error_model="numpy")
def tanh_f32(x: Any) -> Any:
    """tanh of one float32 in float32, within ``MAX_ULP`` ulp; -0.0, ±inf and NaN as numpy's.

    Only selects (NaN fails every comparison, so it flows through), so loops calling it
    vectorize; numba inlines it into them.

    Example:
        >>> [float(tanh_f32(np.float32(v))) for v in (0.0, 20.0, -np.inf)]
        [0.0, 1.0, -1.0]
    """
    a = abs(x)
    c = SATURATE if a > SATURATE else a  # NaN fails the test: it flows through
    s = c * c
    p = fma32(fma32(fma32(fma32(_P4, s, _P3), s, _P2), s, _P1), s, _ONE)
    q = fma32(fma32(fma32(fma32(_Q4, s, _Q3), s, _Q2), s, _Q1), s, _ONE)
    r = c * p / q
    r = _ONE if r > _ONE or c == SATURATE else r
    return math.copysign(r, x)  # -0.0 stays -0.0; an odd function, exactly


def _fingerprint() -> str:
    """A digest of the function's code and constants: kernels inlining it name it in their
    source, so a changed ``tanh_f32`` is a new kernel, never stale cached machine code."""
    code = tanh_f32.py_func.__code__
    parts = (code.co_code, code.co_consts, code.co_names, _P, _Q, SATURATE)
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


FINGERPRINT = _fingerprint()
IMPORT = f"from dualflow.kernels.fast_tanh import tanh_f32  # {FINGERPRINT}"
"""The line a generated numba kernel imports ``tanh_f32`` with (``cpu_numba.header``)."""


def _loop(x: Any, out: Any) -> None:
    for i in range(x.shape[0]):
        out[i] = tanh_f32(x[i])


def _loop_inplace(out: Any) -> None:  # one pointer: LLVM vectorizes without an alias check
    for i in range(out.shape[0]):
        out[i] = tanh_f32(out[i])


@functools.cache
def _kernels() -> tuple[Any, Any]:
    """The two loops, compiled on first use; machine code kept in the signed kernels cache."""
    store = open_store("kernels")
    compiled = []
    for fn, signature in ((_loop, "void(f4[::1], f4[::1])"), (_loop_inplace, "void(f4[::1])")):
        kernel = numba.njit(nogil=True, cache=False, error_model="numpy")(fn)
        if store is not None:
            numba_cache.attach(kernel, store, f"k_tanh32_{FINGERPRINT}{fn.__name__}")
        kernel.compile(signature)
        kernel.disable_compile()
        compiled.append(kernel)
    return compiled[0], compiled[1]


def numpy_tanh(x: Any, out: Any = None) -> Any:
    """``np.tanh(x, out=out)``, whose float32 loop is ``tanh_f32`` (on both cores for big
    arrays); other dtypes are numpy's own.

    Example:
        >>> numpy_tanh(np.array([0.0, -0.5, 30.0], np.float32)).tolist()
        [0.0, -0.46211716532707214, 1.0]
        >>> numpy_tanh(np.array([0.5])).tolist() == np.tanh(np.array([0.5])).tolist()
        True
    """
    array = np.asarray(x)
    if array.dtype not in FLOAT32_LOOP:
        return np.tanh(x) if out is None else np.tanh(x, out=out)
    if out is None:
        result = np.empty_like(array, dtype=np.float32)  # numpy's layout for it (order K)
        _into(array, result)
        return result if isinstance(x, np.ndarray) else result[()]
    if not (isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == array.shape):
        np.copyto(out, numpy_tanh(array), casting="same_kind")  # numpy's out= casting rule
        return out
    _into(array, out)
    return out


def _flat(a: np.ndarray) -> bool:
    return a.flags.c_contiguous or a.flags.f_contiguous


def _into(x: np.ndarray, out: np.ndarray) -> None:
    """``out[...] = tanh(x)``: a float32 array of x's shape; both walked in memory order."""
    target = out if _flat(out) else np.empty(out.shape, np.float32)
    same = x.dtype == np.float32 and _flat(x) and x.strides == target.strides
    alias = same and x.size > 0 and x.ctypes.data == target.ctypes.data
    if not same or (not alias and np.may_share_memory(x, target)):
        source = np.empty_like(target)
        np.copyto(source, x, casting="unsafe")  # int16/uint16 -> float32 is exact
        x, alias = source, False
    flat_out = target.ravel(order="K")
    flat_in = flat_out if alias else x.ravel(order="K")
    loop, inplace = _kernels()
    bounds = split(flat_out.size, parts_for(flat_out.size, MIN_PART))
    if alias:
        jobs = [functools.partial(inplace, flat_out[a:b]) for a, b in bounds]
    else:
        jobs = [functools.partial(loop, flat_in[a:b], flat_out[a:b]) for a, b in bounds]
    run_parts(jobs)  # each part writes only its own range
    if target is not out:
        np.copyto(out, target)
