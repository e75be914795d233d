"""Elementwise activation functions (tanh, sigmoid, relu, gelu...), one expression each.

Expressions are chosen to be numerically stable in float32 without warnings: ``sigmoid`` uses
``0.5 * tanh(0.5 * x) + 0.5`` (no overflow of ``exp(-x)``), ``softplus`` splits off ``max(x, 0)``.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dualflow.ops.arithmetic import erf, exp, greater, where
from dualflow.ops.creation import ZeroGradient
from dualflow.ops.registry import elementwise, public_function

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@elementwise("tanh", "tanh(x)", saves=("y",))
def TANH(ctx, gy):
    """Hyperbolic tangent."""
    return tanh_grad(ctx.y, gy)


# Dedicated gradient ops: one eager call instead of three for the most common activations.
@elementwise("tanh_grad", "gy * (1 - y * y)", args=("y", "gy"), saves=("x0", "x1"))
def TANH_GRAD(ctx, ggx):
    """Gradient of tanh from its output: ``gy * (1 - y^2)``."""
    y, gy = ctx.x0, ctx.x1
    need_y, need_gy = ctx.needs_input_grad
    return (ggx * gy * -2 * y if need_y else None), (tanh_grad(y, ggx) if need_gy else None)


@elementwise("sigmoid", "0.5 * tanh(0.5 * x) + 0.5", saves=("y",))
def SIGMOID(ctx, gy):
    """Logistic sigmoid ``1 / (1 + exp(-x))``."""
    return sigmoid_grad(ctx.y, gy)


def _one_loop(expression: Callable, module: str, name: str) -> Callable:
    """An op's forward that runs ``fast_math.<module>.<name>``, the expression's float32 loop
    (its bits, in one numba call), on C-ordered float32 numpy arrays, else the expression: on
    small arrays the calls around the loop cost more than the loop (sigmoid 3.7 -> 1.1 us, tanh
    1.6 -> 1.1 on 16x16). numba is imported at the first such call, as the expression's does."""
    loop: list[Callable] = []
    f32 = np.dtype(np.float32)

    def forward(xp: Any, x: Any) -> Any:
        if type(x) is np.ndarray and x.dtype is f32 and x.flags.c_contiguous:
            if not loop:
                fast_math = importlib.import_module(f"dualflow.kernels.fast_math.{module}")
                loop.append(getattr(fast_math, name))
            return loop[0](x)
        return expression(xp, x)

    return forward


def _one_loop_out(make_out: Callable, module: str, name: str) -> Callable:
    """An op's ``out=`` forward factory (``OpDef.out``) whose forwards run ``fast_math.<module>.
    <name>(x, out)`` when both are C-ordered float32 numpy arrays of one shape, else the
    expression's: a plan step then makes one pass as eager's forward does (sigmoid's expression
    is four; the O0 elementwise chain was 1.39x eager once eager had the loop)."""
    loop: list[Callable] = []
    f32 = np.dtype(np.float32)

    def factory(checked: bool = True) -> Callable:
        general = make_out(checked)

        def forward(xp: Any, x: Any, out: Any) -> Any:
            if (
                type(x) is np.ndarray
                and type(out) is np.ndarray
                and x.dtype is f32
                and out.dtype is f32
                and x.shape == out.shape
                and x.flags.c_contiguous
                and out.flags.c_contiguous
            ):
                if not loop:
                    fast_math = importlib.import_module(f"dualflow.kernels.fast_math.{module}")
                    loop.append(getattr(fast_math, name))
                return loop[0](x, out)
            return general(xp, x, out=out)

        return forward

    return factory


TANH.forward = _one_loop(TANH.forward, "fast_tanh", "fresh_tanh")
SIGMOID.forward = _one_loop(SIGMOID.forward, "fast_sigmoid", "numpy_sigmoid")
SIGMOID.out = _one_loop_out(SIGMOID.out, "fast_sigmoid", "sigmoid_out")


@elementwise("sigmoid_grad", "gy * y * (1 - y)", args=("y", "gy"), saves=("x0", "x1"))
def SIGMOID_GRAD(ctx, ggx):
    """Gradient of sigmoid from its output: ``gy * y * (1 - y)``."""
    y, gy = ctx.x0, ctx.x1
    need_y, need_gy = ctx.needs_input_grad
    return (ggx * gy * (1 - 2 * y) if need_y else None), (sigmoid_grad(y, ggx) if need_gy else None)


@elementwise(
    "softplus",
    "maximum(x, 0) + log1p(exp(-abs(x)))",
    saves=("x0",),
    autocast="float32_cuda",
)
def SOFTPLUS(ctx, gy):
    """``log(1 + exp(x))``, stable for large ``|x|``."""
    return gy * sigmoid(ctx.x0)


@elementwise("relu", "maximum(x, 0)", saves=("y",))
def RELU(ctx, gy):
    """Rectified linear unit ``max(x, 0)`` (one pass; NaN propagates as in PyTorch)."""
    return relu_grad(ctx.y, gy)


@elementwise("relu_grad", "where(y > 0, gy, 0)", args=("y", "gy"), saves=("x0",))
def RELU_GRAD(ctx, ggx):
    """Gradient of relu from its output: ``gy`` where ``y > 0``."""
    # zero, not None, for ``y`` (PyTorch's threshold_backward): what feeds ``y`` stays connected,
    # so a gradient penalty's grad() of a ReLU layer's bias is zeros as in PyTorch, not unused;
    # a symbolic zero: the engine computes nothing below it (a gradient penalty's extra GEMMs)
    return ZeroGradient(ggx), relu_grad(ctx.x0, ggx)


@elementwise("leaky_relu", "where(x > 0, x, x * slope)", attrs=("slope",), saves=("x0",))
def LEAKY_RELU(ctx, gy):
    """Leaky ReLU: ``x`` for ``x > 0``, else ``slope * x``."""
    return where(greater(ctx.x0, 0), gy, gy * ctx.attrs["slope"])


@elementwise(
    "elu", "where(x > 0, x, alpha * expm1(minimum(x, 0)))", attrs=("alpha",), saves=("x0", "y")
)
def ELU(ctx, gy):
    """Exponential linear unit."""
    return where(greater(ctx.x0, 0), gy, gy * (ctx.y + ctx.attrs["alpha"]))


@elementwise("gelu", f"0.5 * x * (1 + erf(x * {_INV_SQRT_2!r}))", saves=("x0",))
def GELU(ctx, gy):
    """Gaussian error linear unit, exact (erf) form: ``x * Phi(x)``."""
    x = ctx.x0
    cdf = 0.5 * (1 + erf(x * _INV_SQRT_2))
    pdf = exp(-0.5 * x * x) * _INV_SQRT_2PI
    return gy * (cdf + x * pdf)


@elementwise(
    "gelu_tanh",
    f"0.5 * x * (1 + tanh({_SQRT_2_OVER_PI!r} * (x + 0.044715 * x * x * x)))",
    saves=("x0",),
)
def GELU_TANH(ctx, gy):
    """Gaussian error linear unit, tanh approximation (as in GPT-2)."""
    x = ctx.x0
    t = tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))
    du = _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x)
    return gy * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du)


@elementwise("silu", "x * (0.5 * tanh(0.5 * x) + 0.5)", saves=("x0",))
def SILU(ctx, gy):
    """Sigmoid linear unit (swish) ``x * sigmoid(x)``."""
    x = ctx.x0
    s = sigmoid(x)
    return gy * s * (1 + x * (1 - s))


tanh = public_function(TANH)
tanh_grad = public_function(TANH_GRAD)
sigmoid = public_function(SIGMOID)
sigmoid_grad = public_function(SIGMOID_GRAD)
softplus = public_function(SOFTPLUS)
relu = public_function(RELU)
relu_grad = public_function(RELU_GRAD)
leaky_relu = public_function(LEAKY_RELU, {"slope": 0.01})  # PyTorch's default
elu = public_function(ELU, {"alpha": 1.0})
_gelu_erf = public_function(GELU)
gelu_tanh = public_function(GELU_TANH)
silu = public_function(SILU)


def gelu(x: object, approximate: bool = False) -> object:
    """GELU; ``approximate=True`` uses the tanh form (op ``gelu_tanh``), else the exact erf form.

    Example:
        >>> from dualflow import ops
        >>> round(ops.gelu(1.0).item(), 4), round(ops.gelu(1.0, approximate=True).item(), 4)
        (0.8413, 0.8412)
    """
    return gelu_tanh(x) if approximate else _gelu_erf(x)
