"""Fused expressions run as ``cupy.ElementwiseKernel`` kernels, cached by rendered source.

The rendering to CUDA C lives in ``dualflow.ops.expr_cuda`` (shared with the eager elementwise
kernels, since ops must not import the runtime); this module re-exports it and builds the kernels
of ``fused`` plan steps. Importing needs no cupy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dualflow.ops.expr_cuda import (
    C_TYPES,
    COMPILE_OPTIONS,
    CudaSource,
    elementwise_kernel,
    render_cuda,
    wrap_global,
)
from dualflow.ops.expr_typing import lower_expr

__all__ = ["COMPILE_OPTIONS", "C_TYPES", "CudaSource", "cuda_kernel", "render_cuda", "wrap_global"]

_KERNELS: dict[str, Any] = {}


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
            kernel = _KERNELS[source.name] = elementwise_kernel(source)
        return kernel(*arrays) if out is None else kernel(*arrays, out)

    return run
