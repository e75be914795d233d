"""``batch_norm_grad``: training batch norm's backward for the output's gradient as one op.

Written with ops, ``batch_norm``'s backward is two channel sums and an elementwise expression
that reads ``gy`` and ``x`` again; as one op its forward is one numba kernel on host (N, C, ...)
arrays (``kernels.norm.batch_norm_grad``: float64 sums rounded once), eagerly and in plans
alike, and those array-module calls elsewhere. The batch mean and variance are inputs (the
forward's outputs, which carry their own gradients). Its own backward is written with ops, so
double backward stays exact.

With ``s = rsqrt(var + eps)``, ``xhat = (x - mean) s``, ``n`` values per channel and channel
sums ``Σ``: ``gbeta = Σ gy``, ``ggamma = Σ gy xhat``, ``gx = gamma s ((gy - gbeta / n) - xhat
ggamma / n)``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dualflow.errors import ShapeError
from dualflow.kernels.backend import host_kernels
from dualflow.ops.arithmetic import rsqrt
from dualflow.ops.dispatch import apply
from dualflow.ops.reduction import sum as reduce_sum
from dualflow.ops.registry import OPS, Meta, primitive
from dualflow.ops.shape import broadcast_to, reshape
from dualflow.ops.validate import require_float


def stat_axes(ndim: int) -> tuple[int, ...]:
    """The axes batch norm's statistics reduce: all but 1.

    Example:
        >>> stat_axes(4)
        (0, 2, 3)
    """
    return (0,) + tuple(range(2, ndim))


def channel_shape(ndim: int) -> tuple[int, ...]:
    """The shape (C,) statistics broadcast in against (N, C, ...) arrays.

    Example:
        >>> channel_shape(4)
        (1, -1, 1, 1)
    """
    return (1, -1) + (1,) * (ndim - 2)


def check_params(op: str, x_shape: tuple, params: dict[str, Meta]) -> None:
    """Raise a ``ShapeError`` unless ``x`` is (N, C, ...) and each of ``params`` is a (C,) float.

    Example:
        >>> check_params("batch_norm", (2, 3), {"gamma": Meta((3,), np.float32)})
    """
    if len(x_shape) < 2:
        raise ShapeError(f"{op}: x must be (N, C) or (N, C, H, W), got shape {x_shape}")
    for name, meta in params.items():
        require_float(op, meta, name)
        if tuple(meta.shape) != (x_shape[1],):
            raise ShapeError(
                f"{op}: {name} must have shape ({x_shape[1]},) for x of shape {x_shape}, "
                f"got {tuple(meta.shape)}"
            )


def _array_grads(xp: Any, gy: Any, x: Any, gamma: Any, mean: Any, inv_std: Any) -> tuple:
    """The gradients as array-module calls, in the ops' form's order (cupy, (N, C) inputs)."""
    axes, shape = stat_axes(x.ndim), channel_shape(x.ndim)
    n = math.prod(x.shape) // x.shape[1]
    xhat = (x - mean.reshape(shape)) * inv_std.reshape(shape)
    gbeta = gy.sum(axis=axes)
    ggamma = (gy * xhat).sum(axis=axes)
    centered = gy - (gbeta * (1.0 / n)).reshape(shape)
    slope = (ggamma * (1.0 / n)).reshape(shape)
    return (gamma * inv_std).reshape(shape) * (centered - xhat * slope), ggamma, gbeta


@primitive("batch_norm_grad", saves=("x0", "x1", "x2", "x3", "x4"), nout=3, aliasing="fresh")
class BatchNormGrad:
    """``(gx, ggamma, gbeta)``: training batch norm's gradients for the output's gradient
    ``gy``, from ``x``, ``gamma`` and the batch ``mean`` and biased ``var`` (C,)."""

    def infer(
        gy: Meta, x: Meta, gamma: Meta, mean: Meta, var: Meta, *, eps: float
    ) -> tuple[Meta, Meta, Meta]:
        require_float("batch_norm_grad", gy, "gy")
        shape = tuple(x.shape)
        check_params("batch_norm_grad", shape, {"gamma": gamma, "mean": mean, "var": var})
        require_float("batch_norm_grad", x, "x")
        if tuple(gy.shape) != shape:
            raise ShapeError(
                f"batch_norm_grad: gy of shape {tuple(gy.shape)} must have x's shape {shape}"
            )
        dtype = np.result_type(*(np.dtype(m.dtype) for m in (gy, x, gamma, mean, var)))
        stats = np.result_type(*(np.dtype(m.dtype) for m in (gy, x, mean, var)))
        return Meta(shape, dtype), Meta(shape[1:2], stats), Meta(shape[1:2], np.dtype(gy.dtype))

    def forward(xp, gy, x, gamma, mean, var, *, eps):
        inv_std = OPS["rsqrt"].forward(xp, var + eps)  # the rsqrt op's bits, per channel
        kernels = host_kernels(xp, "batch_norm_grad", gy, x, gamma, mean, inv_std)
        if kernels is not None:  # one numba pass per channel pair (kernels.norm)
            return kernels.backward(gy, x, gamma, mean, inv_std)
        return _array_grads(xp, gy, x, gamma, mean, inv_std)

    def backward(ctx, g_gx, g_ggamma, g_gbeta):
        return _adjoint(ctx.x0, ctx.x1, ctx.x2, ctx.x3, ctx.x4, ctx.attrs["eps"],
                        (g_gx, g_ggamma, g_gbeta), ctx.needs_input_grad)  # fmt: skip


def _adjoint(gy, x, gamma, mean, var, eps, grads: tuple, needs: tuple) -> tuple:
    """The gradients of ``sum(G_gx gx) + sum(G_ggamma ggamma) + sum(G_gbeta gbeta)`` in
    ``(gy, x, gamma, mean, var)``, with ops (``mean`` and ``var`` as independent inputs)."""
    g_gx, g_ggamma, g_gbeta = grads
    axes, shape = stat_axes(x.ndim), channel_shape(x.ndim)
    per = 1.0 / (math.prod(x.shape) // x.shape[1])
    s = rsqrt(var + eps)
    xc = x - reshape(mean, shape)
    xhat = xc * reshape(s, shape)
    ggy = d_xhat = d_scale = d_s = None  # d_scale: the gradient in gamma * s; d_s: in s
    if g_gx is not None:
        # in gy: gx's own formula applied to G_gx (it is linear in gy)
        ggy, q, p = batch_norm_grad(g_gx, x, gamma, mean, var, eps=eps)
        total, weighted = reduce_sum(gy, axes), reduce_sum(gy * xhat, axes)
        rate = reshape(gamma * s * per, shape)
        d_xhat = -rate * (gy * reshape(q, shape) + g_gx * reshape(weighted, shape))
        d_scale = reduce_sum(g_gx * gy, axes) - total * p * per - weighted * q * per
    if g_ggamma is not None:
        ggy = _plus(ggy, reshape(g_ggamma, shape) * xhat)
        d_xhat = _plus(d_xhat, reshape(g_ggamma, shape) * gy)
    if g_gbeta is not None:
        ggy = _plus(ggy, broadcast_to(reshape(g_gbeta, shape), gy.shape))
    gx = gmean = gvar = ggamma = None
    if d_xhat is not None:  # xhat = (x - mean) s
        gx = d_xhat * reshape(s, shape)
        gmean = -reduce_sum(gx, axes)
        d_s = reduce_sum(d_xhat * xc, axes)
    if d_scale is not None:
        ggamma = d_scale * s
        d_s = _plus(d_s, d_scale * gamma)
    if d_s is not None:  # s = (var + eps) ** -0.5
        gvar = d_s * (-0.5 * s * s * s)
    picked = (ggy, gx, ggamma, gmean, gvar)
    return tuple(g if need else None for g, need in zip(picked, needs))


def _plus(a: Any, b: Any) -> Any:
    return b if a is None else a + b


def batch_norm_grad(gy: Any, x: Any, gamma: Any, mean: Any, var: Any, eps: float = 1e-5) -> Any:
    """Training batch norm's ``(gx, ggamma, gbeta)`` for the output's gradient ``gy`` (one numba
    kernel on host (N, C, ...) arrays; eager and compiled share it).

    Example:
        >>> from dualflow import ops
        >>> gx, ggamma, gbeta = ops.batch_norm_grad([[1.0], [3.0]], [[1.0], [3.0]], [1.0], [2.0],
        ...                                         [1.0], eps=0.0)
        >>> gx.tolist(), ggamma.tolist(), gbeta.tolist()
        ([[0.0], [0.0]], [2.0], [4.0])
    """
    return apply(BatchNormGrad, gy, x, gamma, mean, var, eps=float(eps))
