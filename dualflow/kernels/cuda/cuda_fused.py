"""Fused expressions run as ``cupy.ElementwiseKernel`` or, ending in a full ``sum``, as
``cupy.ReductionKernel`` kernels, cached by rendered source. The rendering to CUDA C lives in
``cuda_render`` (shared with the eager elementwise kernels, since ops must not import the
runtime); this module re-exports it, adds the reductions, and needs no cupy to import.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, NamedTuple

from dualflow.kernels.cuda.cuda_render import (
    C_TYPES,
    COMPILE_OPTIONS,
    CudaSource,
    ctype,
    elementwise_kernel,
    render_cuda,
    wrap_global,
)
from dualflow.kernels.expr.expression import compile_numpy
from dualflow.kernels.expr.typed_program import Program, lower_expr, sum_dtypes

__all__ = [
    "COMPILE_OPTIONS",
    "C_TYPES",
    "CudaReduction",
    "CudaSource",
    "cuda_kernel",
    "render_cuda",
    "render_cuda_sum",
    "wrap_global",
    "wrap_sum_global",
]

_KERNELS: dict[str, Any] = {}


class CudaReduction(NamedTuple):
    """The strings ``cupy.ReductionKernel`` takes; the map is a ``__device__`` function in the
    preamble (named ``map_function``) returning the element in ``reduce_type``."""

    in_params: str
    out_params: str
    map_expr: str
    reduce_expr: str
    post_map_expr: str
    identity: str
    reduce_type: str
    name: str
    map_function: str
    preamble: str


def render_cuda_sum(program: Program, name: str = "") -> CudaReduction:
    """CUDA C of ``sum(program)`` over all elements: floats are added in ``double`` and cast to
    the output type once at the end (post-map), integers in numpy's sum type.

    Example:
        >>> e = ("call", "multiply", ("var", "a0"), ("var", "a0"))
        >>> r = render_cuda_sum(lower_expr(e, ("a0",), ("float32",)))
        >>> r.reduce_type, r.reduce_expr, r.post_map_expr, r.out_params
        ('double', 'a + b', 'out = (float)a', 'float32 out')
    """
    element = render_cuda(program)
    acc, dtype = sum_dtypes(program.dtype)
    params = ", ".join(
        f"const {ctype(p.split(' ')[0])} {p.split(' ')[1]}" for p in element.in_params.split(", ")
    )
    body = "\n".join("    " + line for line in element.operation.split("\n"))
    digest = hashlib.sha256(f"{params}|{acc}|{element.operation}".encode()).hexdigest()[:16]
    function = f"dualflow_sum_map_{digest}"
    # the element program assigns ``out`` last: here a local of the accumulator type
    preamble = (
        f"{element.preamble}__device__ __forceinline__ {ctype(acc)} {function}({params}) {{\n"
        f"    {ctype(acc)} out;\n{body}\n    return out;\n}}\n"
    )
    args = ", ".join(p.split(" ")[-1] for p in element.in_params.split(", "))
    return CudaReduction(
        element.in_params,
        f"{dtype.name} out",
        f"{function}({args})",
        "a + b",
        f"out = ({ctype(dtype)})a",
        "0",
        ctype(acc),
        name or f"dualflow_sum_{digest}",
        function,
        preamble,
    )


def wrap_sum_global(source: CudaReduction) -> str:
    """A standalone ``extern "C" __global__`` function (for ``nvcc --ptx`` checks): a grid-stride
    loop adding each thread's mapped elements with the reduce expression into ``partial[thread]``.

    Example:
        >>> e = ("call", "exp", ("var", "a0"))
        >>> "partial_ptr[tid] = a;" in wrap_sum_global(render_cuda_sum(lower_expr(e, ("a0",), ("float64",))))
        True
    """  # noqa: E501
    params, loads = [], []
    for param in source.in_params.split(", "):
        dtype, name = param.rsplit(" ", 1)
        params.append(f"const {ctype(dtype)}* {name}_ptr")
        loads.append(f"{name}_ptr[i]")
    acc = source.reduce_type
    return (
        source.preamble
        + f'extern "C" __global__ void {source.name}({", ".join(params)}, {acc}* partial_ptr, '
        "long long n) {\n"
        "    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
        f"    {acc} a = ({acc})({source.identity});\n"
        "    for (long long i = tid; i < n; i += (long long)blockDim.x * gridDim.x) {\n"
        f"        const {acc} b = {source.map_function}({', '.join(loads)});\n"
        f"        a = {source.reduce_expr};\n"
        "    }\n"
        "    partial_ptr[tid] = a;\n"
        "}\n"
    )


def reduction_kernel(source: CudaReduction) -> Any:
    """Build the ``cupy.ReductionKernel`` for ``source`` (cupy compiles it at first launch)."""
    import cupy  # noqa: PLC0415 - optional dependency, present whenever a kernel is wanted

    return cupy.ReductionKernel(
        source.in_params,
        source.out_params,
        source.map_expr,
        source.reduce_expr,
        source.post_map_expr,
        source.identity,
        source.name,
        reduce_type=source.reduce_type,
        preamble=source.preamble,
        options=COMPILE_OPTIONS,
    )


def cuda_kernel(
    expr: tuple,
    args: tuple[str, ...],
    in_dtypes: tuple[str, ...],
    reduce: str | None = None,
    keepdims: bool = False,
) -> Callable:
    """``f(cupy, *arrays, out=None)`` running the expression as a ``cupy.ElementwiseKernel``
    (which broadcasts its inputs; ``out`` is its output argument), or with ``reduce="sum"`` its
    sum over all axes as a ``cupy.ReductionKernel``; built once per rendered source.

    Example:
        >>> callable(cuda_kernel(("call", "exp", ("var", "a0")), ("a0",), ("float32",)))
        True
    """
    if reduce not in (None, "sum"):
        raise NotImplementedError(f"no CUDA kernel for a fused {reduce!r}")
    program = lower_expr(expr, args, in_dtypes)
    try:
        if reduce is not None:
            return _sum_runner(render_cuda_sum(program), keepdims)
        source = render_cuda(program)
    except NotImplementedError:  # a dtype without a CUDA C type here (float16): plain xp calls
        return xp_runner(expr, args, reduce, keepdims)

    def run(xp: Any, *arrays: Any, out: Any = None, **_attrs: Any) -> Any:
        kernel = _KERNELS.get(source.name)
        if kernel is None:
            kernel = _KERNELS[source.name] = elementwise_kernel(source)
        return kernel(*arrays) if out is None else kernel(*arrays, out)

    return run


def one_kernel(expr: tuple, args: tuple[str, ...], dtypes: tuple[str, ...]) -> bool:
    """Whether ``cuda_kernel`` runs the expression over inputs of ``dtypes`` as one CUDA kernel
    (every dtype with a CUDA C type here; float16 regions are plain ``xp`` calls).

    Example:
        >>> e = ("call", "tanh", ("var", "a0"))
        >>> one_kernel(e, ("a0",), ("float32",)), one_kernel(e, ("a0",), ("float16",))
        (True, False)
    """
    try:
        render_cuda(lower_expr(expr, args, dtypes))
    except NotImplementedError:
        return False
    return True


def xp_runner(expr: tuple, args: tuple[str, ...], reduce: str | None, keepdims: bool) -> Callable:
    """The expression evaluated with ``xp`` functions, one call per step (no fusion gain, but
    the plan runs): for regions whose dtypes have no CUDA kernel here."""
    forward = compile_numpy(expr, args, ())

    def run(xp: Any, *arrays: Any, out: Any = None, **_attrs: Any) -> Any:
        result = forward(xp, *arrays)
        if reduce is not None:
            result = xp.sum(result, keepdims=keepdims)
        if out is None:
            return result
        out[...] = result
        return out

    return run


def _sum_runner(source: CudaReduction, keepdims: bool) -> Callable:
    def run(xp: Any, *arrays: Any, out: Any = None, **_attrs: Any) -> Any:
        kernel = _KERNELS.get(source.name)
        if kernel is None:
            kernel = _KERNELS[source.name] = reduction_kernel(source)
        return kernel(*arrays, out=out, axis=None, keepdims=keepdims)

    return run
