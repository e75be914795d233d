"""Fused expressions rendered to CUDA C for ``cupy.ElementwiseKernel``, cached by expression hash.

Every step is a typed local (``float`` math stays ``float``: ``tanhf``, ``expf``, constants cast to
float), so the kernel follows numpy's promotion like the CPU kernels. Importing needs no cupy;
``wrap_global`` makes a standalone ``__global__`` function for checking with ``nvcc --ptx``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from dualflow.runtime.kernels_typing import Program, Ref, Step, lower_expr

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
_MATH = ("exp", "log", "log1p", "expm1", "sqrt", "tanh", "erf", "sin", "cos")
_BINARY = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/"}
_COMPARE = {
    "greater": ">",
    "greater_equal": ">=",
    "less": "<",
    "less_equal": "<=",
    "equal": "==",
    "not_equal": "!=",
}
_KERNELS: dict[str, Any] = {}
# No a*b+c contraction into fma: every step rounds on its own, as the eager cupy ops (one kernel
# each) do, so a fused kernel gives eager's results instead of ones 1 ulp away.
COMPILE_OPTIONS = ("--fmad=false",)


class CudaSource(NamedTuple):
    """The three strings ``cupy.ElementwiseKernel`` takes, plus a name unique to the expression."""

    in_params: str
    out_params: str
    operation: str
    name: str


def _ctype(dtype: np.dtype) -> str:
    try:
        return C_TYPES[np.dtype(dtype).name]
    except KeyError:
        raise NotImplementedError(f"no CUDA C type for {np.dtype(dtype).name}") from None


def _const(value: Any, dtype: np.dtype) -> str:
    value = value.item() if isinstance(value, np.generic) else value
    if isinstance(value, bool):
        literal = "true" if value else "false"
    elif isinstance(value, float) and not math.isfinite(value):
        literal = "(0.0/0.0)" if math.isnan(value) else f"({'-' if value < 0 else ''}1.0/0.0)"
    else:
        literal = repr(value)
    return f"(({_ctype(dtype)})({literal}))"


def _operand(ref: Ref, ctype: np.dtype) -> str:
    if ref[0] == "const":
        return _const(ref[1], ctype)
    name = f"a{ref[1]}" if ref[0] == "in" else f"t{ref[1]}"
    return f"(({_ctype(ctype)}){name})"


def _call(step: Step, ops: list[str]) -> str:
    fn, single = step.fn, step.ctype == np.float32
    if fn in _BINARY:
        return f"({ops[0]} {_BINARY[fn]} {ops[1]})"
    if fn in _COMPARE:
        return f"({ops[0]} {_COMPARE[fn]} {ops[1]})"
    if fn in ("maximum", "minimum"):
        cmp = ">=" if fn == "maximum" else "<="  # numpy: NaN propagates, first operand wins ties
        return f"(({ops[0]} {cmp} {ops[1]} || {ops[0]} != {ops[0]}) ? {ops[0]} : {ops[1]})"
    if fn == "negative":
        return f"(-{ops[0]})"
    if fn == "abs":
        return f"({ops[0]} < 0 ? -{ops[0]} : {ops[0]})"
    if fn == "where":
        return f"({ops[0]} ? {ops[1]} : {ops[2]})"
    if fn == "astype":
        return ops[0]
    if fn in _MATH or fn == "power":
        name = "pow" if fn == "power" else fn
        return f"{name}{'f' if single else ''}({', '.join(ops)})"
    raise NotImplementedError(f"no CUDA rendering for {fn}")


def render_cuda(program: Program, name: str = "") -> CudaSource:
    """CUDA C of a lowered fused expression: inputs ``a0..``, output ``out``.

    Example:
        >>> p = lower_expr(("call", "tanh", ("var", "a0")), ("a0",), ("float32",))
        >>> render_cuda(p).operation
        'float t0 = ((float)tanhf(((float)a0)));\\nout = t0;'
    """
    lines = []
    for j, step in enumerate(program.steps):
        ctypes = [np.dtype(bool)] if step.fn == "where" else []
        ctypes += [step.ctype] * (len(step.operands) - len(ctypes))
        refs = step.operands[:1] if step.fn == "astype" else step.operands
        ops = [_operand(r, c) for r, c in zip(refs, ctypes)]
        ctype = _ctype(step.dtype)
        lines.append(f"{ctype} t{j} = (({ctype}){_call(step, ops)});")
    lines.append(f"out = t{len(program.steps) - 1};")
    operation = "\n".join(lines)
    in_params = ", ".join(f"{d.name} a{k}" for k, d in enumerate(program.in_dtypes))
    out_params = f"{program.dtype.name} out"
    digest = hashlib.sha256(f"{in_params}|{out_params}|{operation}".encode()).hexdigest()[:16]
    return CudaSource(in_params, out_params, operation, name or f"dualflow_fused_{digest}")


def wrap_global(source: CudaSource) -> str:
    """A standalone ``extern "C" __global__`` function running ``source.operation`` per element.

    Example:
        >>> p = lower_expr(("call", "exp", ("var", "a0")), ("a0",), ("float64",))
        >>> "__global__" in wrap_global(render_cuda(p, "k"))
        True
    """
    params, loads = [], []
    for param in source.in_params.split(", "):
        dtype, name = param.rsplit(" ", 1)
        params.append(f"const {_ctype(dtype)}* {name}_ptr")
        loads.append(f"    const {_ctype(dtype)} {name} = {name}_ptr[i];")
    out_dtype, _ = source.out_params.rsplit(" ", 1)
    params.append(f"{_ctype(out_dtype)}* out_ptr")
    body = "\n".join("    " + line for line in source.operation.split("\n"))
    return (
        f'extern "C" __global__ void {source.name}({", ".join(params)}, long long n) {{\n'
        "    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i >= n) return;\n"
        + "\n".join(loads)
        + f"\n    {_ctype(out_dtype)}& out = out_ptr[i];\n{body}\n}}\n"
    )


def cuda_kernel(expr: tuple, args: tuple[str, ...], in_dtypes: tuple[str, ...]) -> Callable:
    """``f(cupy, *arrays, out=None)`` running the expression as a ``cupy.ElementwiseKernel`` (which
    broadcasts its inputs; ``out`` is its output argument); built once per rendered source.

    Example:
        >>> callable(cuda_kernel(("call", "exp", ("var", "a0")), ("a0",), ("float32",)))
        True
    """
    source = render_cuda(lower_expr(expr, args, in_dtypes))

    def run(xp: Any, *arrays: Any, out: Any = None, **_attrs: Any) -> Any:
        kernel = _KERNELS.get(source.name)
        if kernel is None:
            import cupy  # noqa: PLC0415 - only on GPU

            kernel = cupy.ElementwiseKernel(*source, options=COMPILE_OPTIONS)
            _KERNELS[source.name] = kernel
        return kernel(*arrays) if out is None else kernel(*arrays, out)

    return run
