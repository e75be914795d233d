"""The branch-free float32 scalar functions every CPU path inlines (``tanh_f32``, ``exp_f32``),
the LLVM operations numba lacks that they are built from (``fma32``, ``pow2_between``) and the
digest naming such a function in the kernels that inline it (``fingerprint``).

They sit below every module that runs them (``float32_loops``' ufunc loops, ``fast_tanh``,
``fast_exp``, the fused kernels) and below the probe that times them (``work_weights``), whose
weights decide those modules' splits. Their accuracy is documented and tested with their numpy
calls (``fast_tanh.MAX_ULP``, ``fast_exp.MAX_ULP``).
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic


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


@intrinsic
def pow2_between(typingctx: Any, a: Any, b: Any) -> Any:
    """``2.0 ** (bits(a) - bits(b))`` for float32 ``a``, ``b`` whose bit patterns differ by an
    integer in [-126, 127] (integer operations on the bits: vectorized, no float-to-int
    conversion, which LLVM leaves scalar)."""
    if not a == b == types.float32:
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        f32, i32 = ir.FloatType(), ir.IntType(32)
        k = builder.sub(builder.bitcast(args[0], i32), builder.bitcast(args[1], i32))
        bits = builder.shl(builder.add(k, ir.Constant(i32, 127)), ir.Constant(i32, 23))
        return builder.bitcast(bits, f32)

    return types.float32(types.float32, types.float32), codegen


def fingerprint(function: Any, *constants: Any) -> str:
    """A digest of a numba function's code and the constants it reads: kernels inlining it name
    it in their source, so a changed function is a new kernel, never stale cached machine code.

    Example:
        >>> import numba
        >>> len(fingerprint(numba.njit(lambda x: x), 1.0))
        16
    """
    code = function.py_func.__code__
    parts = (code.co_code, code.co_consts, code.co_names, constants)
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


# tanh(x) = x * P(x^2) / Q(x^2) on |x| < SATURATE: a minimax fit of tanh(x)/x (relative error
# 0.36 ulp, 0.49 with float32 coefficients) whose coefficients are all positive, so Horner's
# rule has no cancellation; P(0) = Q(0) = 1 makes it exactly x where x^2 is below 2^-24.
_P = tuple(np.float32(v) for v in ("0.13383268", "0.003498148", "2.0647229e-05", "1.3400205e-08"))
_Q = tuple(np.float32(v) for v in ("0.4671659", "0.025886985", "0.00032896482", "7.796738e-07"))
_P1, _P2, _P3, _P4 = _P
_Q1, _Q2, _Q3, _Q4 = _Q
SATURATE = np.float32(9.010913848876953)  # the least x whose rounded tanh is 1.0
_ONE = np.float32(1.0)


@numba.njit(inline="always", error_model="numpy")
def tanh_f32(x: Any) -> Any:
    """tanh of one float32 in float32, within ``fast_tanh.MAX_ULP`` ulp; -0.0, ±inf and NaN as
    numpy's.

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


TANH_FINGERPRINT = fingerprint(tanh_f32, _P, _Q, SATURATE)
TANH_IMPORT = f"from dualflow.kernels.fast_math.fast_tanh import tanh_f32  # {TANH_FINGERPRINT}"
"""The line a generated numba kernel imports ``tanh_f32`` with (``numba_elementwise.header``)."""


_HIGH = np.float32(89.0)  # exp(89) overflows: larger inputs (and +inf) give inf
_LOW = np.float32(-104.0)  # exp(-104) rounds to 0: smaller inputs (and -inf) give 0
_LOG2E = np.float32(1.4426950408889634)
# t = x * log2(e) + 1.5 * 2**23 rounds to an integer k + 1.5 * 2**23, whose bits are k + bits(1.5
# * 2**23): so k is both a float (t - MAGIC) and, as a bit difference, the exponent of 2**k
_MAGIC = np.float32(12582912.0)
_NEG_LN2_HIGH = np.float32(-0.693359375)  # 9 bits: k * this is exact for |k| <= 150
_NEG_LN2_LOW = np.float32(2.12194440e-4)
# exp(r) = 1 + r + r^2 (C2 + C3 r + ... + C6 r^4), a minimax fit on |r| <= 0.3476 (relative error
# 0.05 ulp, 0.07 with float32 coefficients)
_C = tuple(
    np.float32(v) for v in ("0.49999994", "0.1666652", "0.041668408", "0.008368919", "0.0013814179")
)
_C2, _C3, _C4, _C5, _C6 = _C
_HALF = np.float32(0.5)  # and tanh's _ONE


@numba.njit(inline="always", error_model="numpy")
def exp_f32(x: Any) -> Any:
    """exp of one float32 in float32, within ``fast_exp.MAX_ULP`` ulp; inf, 0, subnormals and NaN as
    numpy's. Only selects (NaN fails both clamps and flows through), so loops vectorize.

    Example:
        >>> [float(exp_f32(np.float32(v))) for v in (0.0, 100.0, -np.inf, -103.0)]
        [1.0, inf, 0.0, 1.401298464324817e-45]
    """
    c = _HIGH if x > _HIGH else x
    c = _LOW if c < _LOW else c
    t = fma32(c, _LOG2E, _MAGIC)
    k = t - _MAGIC
    r = fma32(k, _NEG_LN2_LOW, fma32(k, _NEG_LN2_HIGH, c))
    p = fma32(fma32(fma32(fma32(_C6, r, _C5), r, _C4), r, _C3), r, _C2)
    p = fma32(fma32(p, r, _ONE), r, _ONE)
    half = fma32(k, _HALF, _MAGIC)  # k1 = round(k / 2): 2**k = 2**k1 * 2**(k - k1), both normal
    return p * pow2_between(half, _MAGIC) * pow2_between(t, half)  # one rounding: the last


EXP_FINGERPRINT = fingerprint(exp_f32, _HIGH, _LOW, _LOG2E, _MAGIC, _NEG_LN2_HIGH, _NEG_LN2_LOW, _C)
EXP_IMPORT = f"from dualflow.kernels.fast_math.fast_exp import exp_f32  # {EXP_FINGERPRINT}"
"""The line a generated numba kernel imports ``exp_f32`` with (``numba_elementwise.header``)."""
