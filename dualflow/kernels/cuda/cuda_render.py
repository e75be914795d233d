"""Typed expression programs rendered to CUDA C for ``cupy.ElementwiseKernel``: the one renderer
behind the eager elementwise kernels (``cuda_elementwise``) and the fused ones (``cuda_fused``).

Every step is a typed local (``float`` math stays ``float``: ``tanhf``, ``expf``, constants cast to
float), so a kernel follows numpy's promotion. Importing needs no cupy; ``wrap_global`` makes a
standalone ``__global__`` function for checking with ``nvcc --ptx``.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, NamedTuple

import numpy as np

from dualflow.kernels.expr.scalar_table import FUNCTIONS
from dualflow.kernels.expr.typed_program import Program, Ref

C_TYPES = {
    "bool": "bool",
    "int8": "signed char",
    "int16": "short",
    "int32": "int",
    "int64": "long long",
    "uint8": "unsigned char",
    "uint16": "unsigned short",
    "uint32": "unsigned int",
    "uint64": "unsigned long long",
    "float32": "float",
    "float64": "double",
}
# No a*b+c contraction into fma: every step rounds on its own, as numpy (and cupy's one-kernel-
# per-ufunc eager ops) do, so kernels give eager's results instead of ones 1 ulp away.
COMPILE_OPTIONS = ("--fmad=false",)
# Integer ``power`` by squaring (CUDA's pow is floating point only). numpy raises for negative
# exponents; a kernel cannot, so those give what cupy's integer power gives (1, ±1 or 0). The
# guard lets several kernels that use it share one .cu file.
IPOW_PREAMBLE = """#ifndef DUALFLOW_IPOW
#define DUALFLOW_IPOW
template <typename T> __device__ T dualflow_ipow(T base, T exponent) {
    if (exponent < 0) {
        if (base == 1) return 1;
        if (base == -1) return (exponent & 1) ? -1 : 1;
        return 0;
    }
    T result = 1;
    while (exponent > 0) {
        if (exponent & 1) result *= base;
        base *= base;
        exponent >>= 1;
    }
    return result;
}
#endif
"""


_DIVISIONS = ("remainder", "fmod", "floor_divide")
# remainder, fmod and floor_divide as numpy computes them: floats by ``npy_divmod`` (fmod, then
# the floor and the sign of zero fixed up), integers floored with division by zero giving 0 (a
# kernel cannot warn) and MIN % -1 giving 0 instead of C's undefined behaviour.
DIVISION_PREAMBLE = """#ifndef DUALFLOW_DIVISION
#define DUALFLOW_DIVISION
template <typename T> __device__ T dualflow_fdivmod(T a, T b, T* mod) {
    T m = fmod(a, b);
    if (b == 0) { *mod = m; return a / b; }
    T div = (a - m) / b;
    if (m != 0) {
        if ((b < 0) != (m < 0)) { m += b; div -= (T)1; }
    } else {
        m = copysign((T)0, b);
    }
    *mod = m;
    if (div == 0) return copysign((T)0, a / b);
    T floordiv = floor(div);
    if (div - floordiv > (T)0.5) floordiv += (T)1;
    return floordiv;
}
template <typename T> __device__ T dualflow_fremainder(T a, T b) {
    T mod; dualflow_fdivmod(a, b, &mod); return mod;
}
template <typename T> __device__ T dualflow_ffloor_divide(T a, T b) {
    T mod; return dualflow_fdivmod(a, b, &mod);
}
template <typename T> __device__ T dualflow_ffmod(T a, T b) { return fmod(a, b); }
template <typename T> __device__ bool dualflow_minus_one(T b) { return (T)-1 < 0 && b == (T)-1; }
template <typename T> __device__ T dualflow_ifmod(T a, T b) {
    return (b == 0 || dualflow_minus_one(b)) ? (T)0 : (T)(a % b);
}
template <typename T> __device__ T dualflow_iremainder(T a, T b) {
    if (b == 0 || dualflow_minus_one(b)) return 0;
    T r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? (T)(r + b) : r;
}
template <typename T> __device__ T dualflow_ifloor_divide(T a, T b) {
    if (b == 0) return 0;
    if (dualflow_minus_one(b)) return (T)(0 - a);  /* MIN // -1 wraps to MIN, as numpy's */
    T q = a / b;
    return ((a % b) != 0 && ((a < 0) != (b < 0))) ? (T)(q - 1) : q;
}
#endif
"""


class CudaSource(NamedTuple):
    """The strings ``cupy.ElementwiseKernel`` takes, a name unique to the source, and a preamble."""

    in_params: str
    out_params: str
    operation: str
    name: str
    preamble: str = ""


def elementwise_kernel(source: CudaSource) -> Any:
    """Build the ``cupy.ElementwiseKernel`` for ``source`` (cupy compiles it at first launch).

    Only called with cupy arrays at hand, so cupy is imported here and nowhere else.
    """
    import cupy  # noqa: PLC0415 - optional dependency, present whenever a kernel is wanted

    return cupy.ElementwiseKernel(
        source.in_params,
        source.out_params,
        source.operation,
        source.name,
        preamble=source.preamble,
        options=COMPILE_OPTIONS,
    )


def ctype(dtype: Any) -> str:
    """The CUDA C type of a numpy dtype; NotImplementedError for those without one (float16).

    Example:
        >>> ctype("float32")
        'float'
    """
    try:
        return C_TYPES[np.dtype(dtype).name]
    except KeyError:
        raise NotImplementedError(f"no CUDA C type for {np.dtype(dtype).name}") from None


def _const(value: Any, dtype: np.dtype) -> str:
    value = value.item() if isinstance(value, np.generic | np.ndarray) else value
    if type(value) not in (bool, int, float):  # written into C source: numbers only
        raise NotImplementedError(f"a CUDA kernel constant must be a number, not {value!r}")
    if isinstance(value, bool):
        literal = "true" if value else "false"
    elif isinstance(value, float) and not math.isfinite(value):
        literal = "(0.0/0.0)" if math.isnan(value) else f"({'-' if value < 0 else ''}1.0/0.0)"
    else:
        literal = repr(value)
    return f"(({ctype(dtype)})({literal}))"


def _operand(ref: Ref, dtype: np.dtype) -> str:
    if ref[0] == "const":
        return _const(ref[1], dtype)
    name = f"a{ref[1]}" if ref[0] == "in" else f"t{ref[1]}"
    return f"(({ctype(dtype)}){name})"


def render_cuda(program: Program, name: str = "", prefix: str = "dualflow_fused") -> CudaSource:
    """CUDA C of a lowered expression: inputs ``a0..``, output ``out``.

    Args:
        program: the typed program (``typed_program.lower_expr``).
        name: the kernel name; by default ``prefix`` plus a hash of the source.
        prefix: the start of the default name.

    Raises:
        NotImplementedError: a dtype without a CUDA C type (float16, complex) or a function
            without a rendering.

    Example:
        >>> from dualflow.kernels.expr.typed_program import lower_expr
        >>> p = lower_expr(("call", "tanh", ("var", "a0")), ("a0",), ("float32",))
        >>> render_cuda(p).operation
        'float t0 = ((float)tanhf(((float)a0)));\\nout = t0;'
    """
    if not program.steps:
        raise NotImplementedError("an expression without a call has no kernel")
    lines = []
    for j, step in enumerate(program.steps):
        row = FUNCTIONS[step.fn]
        ops = [
            _operand(r, np.dtype(bool) if kind == "bool" else step.ctype)
            for r, kind in zip(step.operands, row.kinds())
            if kind != "dtype"  # astype's target: the step's result type
        ]
        result = ctype(step.dtype)
        lines.append(f"{result} t{j} = (({result}){row.cuda(ops, step)});")
    lines.append(f"out = t{len(program.steps) - 1};")
    operation = "\n".join(lines)
    in_params = ", ".join(f"{d.name} a{k}" for k, d in enumerate(program.in_dtypes))
    out_params = f"{program.dtype.name} out"
    preamble = IPOW_PREAMBLE if "dualflow_ipow(" in operation else ""
    if any(f"dualflow_{k}{n}(" in operation for k in "if" for n in _DIVISIONS):
        preamble += DIVISION_PREAMBLE
    digest = hashlib.sha256(f"{in_params}|{out_params}|{operation}".encode()).hexdigest()[:16]
    return CudaSource(in_params, out_params, operation, name or f"{prefix}_{digest}", preamble)


def wrap_global(source: CudaSource) -> str:
    """A standalone ``extern "C" __global__`` function running ``source.operation`` per element
    (after the source's preamble, whose guard lets many of them share one file).

    Example:
        >>> from dualflow.kernels.expr.typed_program import lower_expr
        >>> p = lower_expr(("call", "exp", ("var", "a0")), ("a0",), ("float64",))
        >>> "__global__" in wrap_global(render_cuda(p, "k"))
        True
    """
    params, loads = [], []
    for param in source.in_params.split(", "):
        dtype, name = param.rsplit(" ", 1)
        params.append(f"const {ctype(dtype)}* {name}_ptr")
        loads.append(f"    const {ctype(dtype)} {name} = {name}_ptr[i];")
    out_dtype, _ = source.out_params.rsplit(" ", 1)
    params.append(f"{ctype(out_dtype)}* out_ptr")
    body = "\n".join("    " + line for line in source.operation.split("\n"))
    return (
        source.preamble
        + f'extern "C" __global__ void {source.name}({", ".join(params)}, long long n) {{\n'
        "    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i >= n) return;\n"
        + "\n".join(loads)
        + f"\n    {ctype(out_dtype)}& out = out_ptr[i];\n{body}\n}}\n"
    )
