"""Batch normalization: ``batch_norm`` (a training primitive, or an affine map at inference);
``layer_norm`` is ``ops.layer_norm``'s module.

On numpy arrays with spatial axes the training forward is one numba kernel
(``kernels.norm.batch_norm``), eagerly and in plans alike.

The training primitive also returns the batch mean and biased variance, so running statistics are
updated from them through ``assign`` without recomputing; its backward accounts for gradients that
reach those outputs too, which keeps double backward exact. On cupy arrays its forward runs in
cuDNN when it can (``kernels.cuda.cudnn``); the backward is written with ops, so it has no cuDNN
path.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dualflow._config import config, no_grad
from dualflow.errors import ShapeError
from dualflow.kernels.backend import backend_of, host_kernels
from dualflow.ops.arithmetic import add, multiply, rsqrt, subtract
from dualflow.ops.dispatch import apply
from dualflow.ops.normalization_grad import batch_norm_grad, channel_shape, check_params, stat_axes
from dualflow.ops.reduction import sum as reduce_sum
from dualflow.ops.registry import Meta, primitive
from dualflow.ops.shape import broadcast_to, reshape
from dualflow.ops.state import assign
from dualflow.ops.validate import meta_of, require_float


@primitive("batch_norm", saves=("x0", "x1", "y1", "y2"), nout=3, aliasing="fresh")
class BatchNorm:
    """Training batch norm over all axes but 1; outputs (y, batch mean, biased batch variance)."""

    def infer(x: Meta, gamma: Meta, beta: Meta, *, eps: float) -> tuple[Meta, Meta, Meta]:
        dtype = require_float("batch_norm", x, "x")
        shape = tuple(x.shape)
        check_params("batch_norm", shape, {"gamma": gamma, "beta": beta})
        if math.prod(shape) // shape[1] < 2:
            raise ShapeError(
                f"batch_norm: training needs more than one value per channel, got x of shape "
                f"{shape}; use a larger batch or train=False"
            )
        out = np.result_type(dtype, np.dtype(gamma.dtype), np.dtype(beta.dtype))
        return (Meta(shape, out), Meta(shape[1:2], dtype), Meta(shape[1:2], dtype))

    def forward(xp, x, gamma, beta, *, eps):
        library = backend_of(xp).library  # cuDNN on cupy
        if library is not None and library.batch_norm_usable(x, gamma, beta, eps):
            outputs = library.batch_norm(x, gamma, beta, eps)
            if outputs is not None:  # else cuDNN refused the case: the xp code below
                return outputs
        kernels = host_kernels(xp, "batch_norm", x, gamma, beta)
        if kernels is not None:  # one numba pass per channel (kernels.norm.batch_norm)
            return kernels.forward(x, gamma, beta, eps)
        axes, shape = stat_axes(x.ndim), channel_shape(x.ndim)
        mu = x.mean(axis=axes)
        xc = x - mu.reshape(shape)
        var = xp.square(xc).mean(axis=axes)
        scale = (gamma / xp.sqrt(var + eps)).reshape(shape)
        if scale.dtype == xc.dtype == beta.dtype:  # reuse the temporary: one allocation less
            xc *= scale
            xc += beta.reshape(shape)
            return xc, mu, var
        return xc * scale + beta.reshape(shape), mu, var

    def backward(ctx, gy, gmean, gvar):
        x, gamma, mu, var = ctx.x0, ctx.x1, ctx.y1, ctx.y2
        axes, shape = stat_axes(x.ndim), channel_shape(x.ndim)
        n = math.prod(x.shape) // x.shape[1]
        need_x, need_gamma, need_beta = ctx.needs_input_grad
        gx = ggamma = gbeta = None
        if gy is not None and need_x:  # one op: one numba kernel on host arrays
            gx, ggamma, gbeta = batch_norm_grad(gy, x, gamma, mu, var, ctx.attrs["eps"])
        elif gy is not None:
            gbeta = reduce_sum(gy, axes)
            xhat = (x - reshape(mu, shape)) * reshape(rsqrt(var + ctx.attrs["eps"]), shape)
            ggamma = reduce_sum(gy * xhat, axes)
        if need_x and gmean is not None:  # d mean / dx = 1/n
            term = broadcast_to(reshape(gmean * (1.0 / n), shape), x.shape)
            gx = term if gx is None else gx + term
        if need_x and gvar is not None:  # d var / dx = 2 (x - mean) / n
            # x - mean only here: the kernel path needs no centred copy of x
            term = (x - reshape(mu, shape)) * reshape(gvar * (2.0 / n), shape)
            gx = term if gx is None else gx + term
        return gx, (ggamma if need_gamma else None), (gbeta if need_beta else None)


def _update_running(stats: tuple[Any, Any], batch: tuple[Any, Any], momentum: float, n: int):
    running_mean, running_var = stats
    batch_mean, batch_var = batch
    with no_grad():  # state writes, never differentiated
        assign(running_mean, running_mean * (1.0 - momentum) + batch_mean * momentum)
        # PyTorch's rule: the running variance tracks the unbiased batch variance.
        assign(running_var, running_var * (1.0 - momentum) + batch_var * (momentum * n / (n - 1)))


def batch_norm(
    x: Any,
    gamma: Any,
    beta: Any,
    running_mean: Any = None,
    running_var: Any = None,
    train: bool | None = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Any:
    """Batch normalization of x (N, C) or (N, C, H, W) over all axes but 1.

    Training normalizes with the batch mean and biased variance and, when running statistics
    (Tensors) are given, updates them in place: ``running = (1 - momentum) * running +
    momentum * batch_stat`` (the unbiased variance for ``running_var``). With ``train=False``
    the running statistics are used (the batch's when none are given). ``train=None`` reads
    ``config.train``.

    Example:
        >>> from dualflow import ops
        >>> y = ops.batch_norm([[1.0], [3.0]], [1.0], [0.0], eps=0.0)
        >>> y.tolist()
        [[-1.0], [1.0]]
    """
    train = config.train if train is None else bool(train)
    x_meta = meta_of(x)
    check_params("batch_norm", x_meta.shape, {"gamma": meta_of(gamma), "beta": meta_of(beta)})
    stats = (running_mean, running_var)
    if (running_mean is None) != (running_var is None):
        raise ValueError("batch_norm: pass both running_mean and running_var, or neither")
    if running_mean is not None:
        metas = {"running_mean": meta_of(running_mean), "running_var": meta_of(running_var)}
        check_params("batch_norm", x_meta.shape, metas)
        if train and not all(hasattr(s, "requires_grad") for s in stats):
            raise TypeError("batch_norm: running statistics must be dualflow Tensors (updated)")
    if not train and running_mean is not None:
        shape = channel_shape(len(x_meta.shape))
        scale = multiply(gamma, rsqrt(add(running_var, eps)))
        shift = subtract(beta, multiply(running_mean, scale))
        return add(multiply(x, reshape(scale, shape)), reshape(shift, shape))
    y, batch_mean, batch_var = apply(BatchNorm, x, gamma, beta, eps=float(eps))
    if train and running_mean is not None:
        n = math.prod(x_meta.shape) // x_meta.shape[1]
        _update_running(stats, (batch_mean, batch_var), float(momentum), n)
    return y
