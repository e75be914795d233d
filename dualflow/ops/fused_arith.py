"""Fused arithmetic ops produced by the fold pass's operation folding: ``fma(a, b, c) = a * b + c``.

numpy evaluates the expression as a multiply then an add (two roundings), exactly like the unfused
graph, so folding never changes results; fused kernels may still compute it in one sweep.
"""

from __future__ import annotations

from dualflow.ops.registry import elementwise, public_function


@elementwise("fma", "a * b + c", args=("a", "b", "c"), saves=("x0", "x1"))
def FMA(ctx, gy):
    """Multiply-add ``a * b + c``."""
    need_a, need_b, _ = ctx.needs_input_grad
    return (gy * ctx.x1 if need_a else None), (gy * ctx.x0 if need_b else None), gy


fma = public_function(FMA)
