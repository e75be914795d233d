"""``layer_norm`` (PyTorch's ``F.layer_norm`` over the trailing ``gamma.ndim`` axes) and its
backward ``layer_norm_grad``, each one op.

Written with ops, a layer norm is ~10 elementwise and reduction steps forward and ~15 backward,
each reading the activations again; as ops, each is one numba pass on host float32/float64
arrays (``kernels.norm.layer_norm``, ``kernels.norm.layer_norm_grad``), eagerly and in plans
alike, and array-module calls elsewhere. The forward also returns each row's ``mean`` and
``rstd = 1 / sqrt(var + eps)`` (x's shape with the normalized axes 1), which its backward reads
and which carry their own gradients; ``layer_norm_grad``'s backward is written with ops, so
double backward stays exact.

With ``xhat = (x - mean) rstd``, ``g = gy gamma``, row means ``Ā`` and sums over rows ``Σ``:
``gx = rstd (g - Ā g - xhat Ā(g xhat))``, ``ggamma = Σ gy xhat``, ``gbeta = Σ gy``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dualflow.errors import ShapeError, with_location
from dualflow.kernels.backend import HOST_LOADERS, host_kernels
from dualflow.ops.creation import ones_like
from dualflow.ops.dispatch import apply
from dualflow.ops.reduction import mean as reduce_mean
from dualflow.ops.reduction import sum as reduce_sum
from dualflow.ops.registry import Meta, primitive
from dualflow.ops.shape import broadcast_to
from dualflow.ops.validate import meta_of, require_float


def _check(op: str, x: Meta, gamma: Meta, others: dict[str, Meta]) -> tuple:
    """The statistics' shape (x's with gamma's axes 1); a ShapeError unless x's trailing axes
    are gamma's shape and each of ``others`` has the shape its name says."""
    shape, k = tuple(x.shape), len(gamma.shape)
    if k == 0 or k > len(shape) or shape[len(shape) - k :] != tuple(gamma.shape):
        raise ShapeError(
            f"{op}: gamma of shape {tuple(gamma.shape)} must equal the trailing dimensions of x "
            f"of shape {shape}"
        )
    stats = shape[: len(shape) - k] + (1,) * k
    for name, meta in others.items():
        want = (
            stats if name in ("mean", "rstd") else tuple(gamma.shape) if name == "beta" else shape
        )
        if tuple(meta.shape) != want:
            raise ShapeError(f"{op}: {name} of shape {tuple(meta.shape)} must be {want}")
    return stats


def _axes(ndim: int, k: int) -> tuple[int, ...]:
    return tuple(range(ndim - k, ndim))


@primitive("layer_norm", saves=("x0", "x1", "y1", "y2"), nout=3, aliasing="fresh",
           autocast="float32_cuda")  # fmt: skip
class LayerNorm:
    """Layer norm over x's trailing ``gamma.ndim`` axes; outputs (y, mean, rstd)."""

    def infer(x: Meta, gamma: Meta, beta: Meta, *, eps: float) -> tuple[Meta, Meta, Meta]:
        dtype = require_float("layer_norm", x, "x")
        for name, meta in (("gamma", gamma), ("beta", beta)):
            require_float("layer_norm", meta, name)
        stats = _check("layer_norm", x, gamma, {"beta": beta})
        out = np.result_type(dtype, np.dtype(gamma.dtype), np.dtype(beta.dtype))
        return Meta(tuple(x.shape), out), Meta(stats, dtype), Meta(stats, dtype)

    def forward(xp, x, gamma, beta, *, eps):
        kernels = host_kernels(xp, "layer_norm", x, gamma, beta)
        if kernels is not None:  # one numba pass over each row (kernels.norm.layer_norm)
            return kernels.forward(x, gamma, beta, eps)
        axes = _axes(x.ndim, gamma.ndim)
        mu = x.mean(axis=axes, keepdims=True)
        xc = x - mu
        rstd = 1 / xp.sqrt((xc * xc).mean(axis=axes, keepdims=True) + eps)
        return xc * rstd * gamma + beta, mu, rstd.astype(x.dtype, copy=False)

    def backward(ctx, gy, gmean, grstd):
        x, gamma, mu, rstd = ctx.x0, ctx.x1, ctx.y1, ctx.y2
        need_x, need_gamma, need_beta = ctx.needs_input_grad
        gx = ggamma = gbeta = None
        if gy is not None:  # one op: one numba kernel on host arrays
            gx, ggamma, gbeta = layer_norm_grad(gy, x, gamma, mu, rstd)
        per = 1.0 / math.prod(gamma.shape)
        if need_x and gmean is not None:  # d mean / dx = 1 / D
            term = broadcast_to(gmean * per, x.shape)
            gx = term if gx is None else gx + term
        if need_x and grstd is not None:  # d rstd / dx = -rstd^3 (x - mean) / D
            term = (x - mu) * (grstd * (-per) * rstd * rstd * rstd)
            gx = term if gx is None else gx + term
        picked = (gx, ggamma, gbeta)
        return tuple(
            g if need else None for g, need in zip(picked, (need_x, need_gamma, need_beta))
        )


def _grad_scratch(metas: tuple, attrs: dict) -> int:
    # the CPU kernel's float64 partial sums of the weight gradients: two of (blocks, D)
    if metas[1] is None or metas[2] is None:  # Python scalars: the array calls run
        return 0
    (x_shape, _), (g_shape, _) = metas[1], metas[2]
    try:
        kernels = HOST_LOADERS["layer_norm_grad"]()  # imported once; numba is loaded by then
    except ImportError:  # no numba: the array calls allocate their own temporaries
        return 0
    rows = math.prod(x_shape[: len(x_shape) - len(g_shape)])
    blocks = -(-rows // kernels.block_rows(rows))
    return 2 * blocks * math.prod(g_shape) * np.dtype(np.float64).itemsize


@primitive(
    "layer_norm_grad",
    saves=("x0", "x1", "x2", "x3", "x4"),
    nout=3,
    aliasing="fresh",
    scratch=_grad_scratch,
)
class LayerNormGrad:
    """``(gx, ggamma, gbeta)``: layer norm's gradients for the output's gradient ``gy``, from
    ``x``, ``gamma`` and each row's ``mean`` and ``rstd``."""

    def infer(gy: Meta, x: Meta, gamma: Meta, mean: Meta, rstd: Meta) -> tuple[Meta, Meta, Meta]:
        for name, meta in (("gy", gy), ("x", x), ("gamma", gamma), ("mean", mean), ("rstd", rstd)):
            require_float("layer_norm_grad", meta, name)
        _check("layer_norm_grad", x, gamma, {"gy": gy, "mean": mean, "rstd": rstd})
        dtype = np.result_type(*(np.dtype(m.dtype) for m in (gy, x, gamma, mean, rstd)))
        stats = np.result_type(*(np.dtype(m.dtype) for m in (gy, x, mean, rstd)))
        params = tuple(gamma.shape)
        return Meta(tuple(x.shape), dtype), Meta(params, stats), Meta(params, np.dtype(gy.dtype))

    def forward(xp, gy, x, gamma, mean, rstd):
        kernels = host_kernels(xp, "layer_norm_grad", gy, x, gamma, mean, rstd)
        if kernels is not None:  # one numba pass over row blocks (kernels.norm)
            return kernels.backward(gy, x, gamma, mean, rstd)
        axes, rows = _axes(x.ndim, gamma.ndim), tuple(range(x.ndim - gamma.ndim))
        xhat = (x - mean) * rstd
        g = gy * gamma
        a, b = g.mean(axis=axes, keepdims=True), (g * xhat).mean(axis=axes, keepdims=True)
        return ((g - a) - xhat * b) * rstd, (gy * xhat).sum(axis=rows), gy.sum(axis=rows)

    def backward(ctx, g_gx, g_ggamma, g_gbeta):
        saved = (ctx.x0, ctx.x1, ctx.x2, ctx.x3, ctx.x4)
        return _adjoint(saved, (g_gx, g_ggamma, g_gbeta), ctx.needs_input_grad)


def _adjoint(saved: tuple, grads: tuple, needs: tuple) -> tuple:
    """The gradients of ``sum(G gx) + sum(G_gamma ggamma) + sum(G_beta gbeta)`` in ``(gy, x,
    gamma, mean, rstd)``, with ops (``mean`` and ``rstd`` as independent inputs)."""
    (gy, x, gamma, mu, s), (g_gx, g_ggamma, g_gbeta) = saved, grads
    axes, rows = _axes(x.ndim, gamma.ndim), tuple(range(x.ndim - gamma.ndim))
    xc = x - mu
    xhat = xc * s
    ggy = d_xhat = d_gamma = d_s = None
    if g_gx is not None:
        # in g = gy gamma: gx's own formula applied to G (it is linear in g)
        d_g = layer_norm_grad(g_gx, x, ones_like(gamma), mu, s)[0]
        ggy, d_gamma = d_g * gamma, reduce_sum(d_g * gy, rows)
        g, h = gy * gamma, g_gx * s
        p, q = reduce_mean(g, axes, keepdims=True), reduce_mean(g * xhat, axes, keepdims=True)
        d_xhat = -(h * q) - reduce_mean(h * xhat, axes, keepdims=True) * g
        d_s = reduce_sum(g_gx * ((g - p) - xhat * q), axes, keepdims=True)
    if g_ggamma is not None:
        ggy = _plus(ggy, g_ggamma * xhat)
        d_xhat = _plus(d_xhat, g_ggamma * gy)
    if g_gbeta is not None:
        ggy = _plus(ggy, broadcast_to(g_gbeta, gy.shape))
    gx = gmean = None
    if d_xhat is not None:  # xhat = (x - mean) s
        gx = d_xhat * s
        gmean = -reduce_sum(gx, axes, keepdims=True)
        d_s = _plus(d_s, reduce_sum(d_xhat * xc, axes, keepdims=True))
    picked = (ggy, gx, d_gamma, gmean, d_s)
    return tuple(g if need else None for g, need in zip(picked, needs))


def _plus(a: Any, b: Any) -> Any:
    return b if a is None else a + b


def layer_norm(x: Any, gamma: Any, beta: Any, eps: float = 1e-5) -> Any:
    """Layer normalization over the trailing ``gamma.ndim`` axes (PyTorch's normalized_shape):
    ``(x - mean) / sqrt(var + eps) * gamma + beta`` with each row's mean and biased variance.

    Example:
        >>> from dualflow import ops
        >>> ops.layer_norm([[1.0, 3.0]], [1.0, 1.0], [0.0, 0.0], eps=0.0).tolist()
        [[-1.0, 1.0]]
    """
    x_meta, g_meta, b_meta = meta_of(x), meta_of(gamma), meta_of(beta)
    require_float("layer_norm", x_meta, "x")
    try:
        _check("layer_norm", x_meta, g_meta, {"beta": b_meta})
    except ShapeError as exc:
        raise ShapeError(with_location(str(exc))) from None
    if not hasattr(x, "shape"):
        x = np.asarray(x)
    return apply(LayerNorm, x, gamma, beta, eps=float(eps))[0]


def layer_norm_grad(gy: Any, x: Any, gamma: Any, mean: Any, rstd: Any) -> Any:
    """Layer norm's ``(gx, ggamma, gbeta)`` for the output's gradient ``gy``, given each row's
    ``mean`` and ``rstd`` (one numba kernel on host arrays; eager and compiled share it).

    Example:
        >>> from dualflow import ops
        >>> gx, ggamma, gbeta = ops.layer_norm_grad([[1.0, 0.0]], [[1.0, 3.0]], [1.0, 1.0],
        ...                                         [[2.0]], [[1.0]])
        >>> gx.tolist(), ggamma.tolist(), gbeta.tolist()
        ([[0.0, 0.0]], [-1.0, 0.0], [1.0, 0.0])
    """
    return apply(LayerNormGrad, gy, x, gamma, mean, rstd)
