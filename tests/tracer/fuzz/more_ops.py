"""More fragments: pooling, sorting and gathering, scatter, where, split/concat/stack, layer norm,
PyTorch-named Tensor methods, in-place writes on a detached intermediate, a cross-entropy term,
float64 inside the program and an embedding lookup.

Each statement maps an activation (batch, width) to the same shape, like ``library``'s, so the
generator composes them with every other fragment and the batch may change between calls.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from dualflow import nn, ops
from tests.tracer.fuzz.fragments import Context, Fragment, Statement, draw_kind, register
from tests.tracer.fuzz.scope import Scope
from tests.tracer.fuzz.spec import Piece


def _pool(scope: Scope, piece: Piece) -> Statement:
    """The activation as one image through a 3x3 stride-1 pooling that keeps its shape (max
    pooling's padded taps never win; average pooling counts them as zeros)."""
    pool = ops.max_pool2d if piece.get("kind") == "max" else ops.avg_pool2d

    def statement(h: Any, env: Any) -> Any:
        image = ops.reshape(h, (1, 1, *h.shape))
        return h + ops.reshape(pool(image, 3, stride=1, pad=1), h.shape) * 0.5

    return statement


def _gather(scope: Scope, piece: Piece) -> Statement:
    """Rows sorted by ``argsort`` and read back with ``take_along_axis``, or added into with
    ``scatter_add`` (a permutation, or every row's max into its own column)."""
    kind = piece.get("kind")
    if kind == "sort":
        return lambda h, env: ops.take_along_axis(h, ops.argsort(h, axis=1), axis=1) * 0.5 + h
    if kind == "scatter":
        return lambda h, env: ops.scatter_add(h, ops.argsort(h, axis=1), ops.tanh(h) * 0.5, axis=1)

    def scatter_max(h: Any, env: Any) -> Any:
        top = ops.argmax(h, axis=1, keepdims=True)
        return ops.scatter_add(h, top, ops.max(h, axis=1, keepdims=True) * -0.5, axis=1)

    return scatter_max


def _where_draw(draw: Any, ctx: Context) -> dict[str, Any]:
    return {"at": draw(st.sampled_from([-0.5, 0.0, 0.3])), "scale": draw(st.sampled_from([0.5, 2]))}


def _where(scope: Scope, piece: Piece) -> Statement:
    at, scale = piece.get("at"), piece.get("scale")
    return lambda h, env: ops.where(ops.greater(h, at), h * scale, ops.tanh(h))


def _pieces(scope: Scope, piece: Piece) -> Statement:
    """``split`` into two column blocks put back the other way round, or ``stack`` and a sum."""
    if piece.get("kind") == "stack" or scope.width < 2:
        return lambda h, env: ops.sum(ops.stack([h, ops.sigmoid(h)], axis=0), axis=0) * 0.5
    cut = max(1, scope.width // 3)

    def swapped(h: Any, env: Any) -> Any:
        left, right = ops.split(h, [cut], axis=1)
        return ops.concat([right * 0.5, ops.tanh(left)], axis=1)

    return swapped


def _layer_norm(scope: Scope, piece: Piece) -> Statement:
    norm = scope.module(nn.LayerNorm(scope.width))
    return lambda h, env: norm(h)


def _methods(scope: Scope, piece: Piece) -> Statement:
    """Tensor methods with PyTorch's meanings: ``max(dim)`` (values, indices), ``t()``,
    ``mean(dim, keepdim=True)``, ``clamp(min, max)``, ``softmax(dim)``."""
    kind = piece.get("kind")
    if kind == "max_dim":

        def centred(h: Any, env: Any) -> Any:
            values, indices = h.max(1)
            # int64 indices times a float are float64 (numpy's promotion, documented): cast
            # them, or the rest of a float32 program would run in float64
            return h - values.unsqueeze(1) * 0.5 + ops.cast(indices.unsqueeze(1), h.dtype) * 0.01

        return centred
    if kind == "transpose":
        return lambda h, env: h.t().softmax(0).t() + h
    if kind == "mean_keepdim":
        return lambda h, env: h - h.mean(1, keepdim=True)
    return lambda h, env: h.clamp(min=-1.0, max=0.5) + h * 0.1


def _inplace(scope: Scope, piece: Piece) -> Statement:
    """In-place writes (``mul_``, ``clamp_``, ``add_``) on an intermediate detached from the
    graph: the step reads the written values, and the gradient flows around them."""

    def statement(h: Any, env: Any) -> Any:
        c = h.detach() * 1.0
        c.mul_(0.5).clamp_(-1.0, 1.0).add_(0.25)
        return h * (1.0 + c)

    return statement


def _cross_entropy(scope: Scope, piece: Piece) -> Statement:
    """A softmax cross-entropy term on the rows' own argmax labels (integer, no gradient)."""
    reduce = piece.get("kind")

    def statement(h: Any, env: Any) -> Any:
        loss = ops.softmax_cross_entropy(h, ops.argmax(h, axis=1), reduce=reduce)
        if reduce == "none":
            return h + ops.reshape(loss, (-1, 1)) * 0.1
        return h + loss * 0.1

    return statement


def _float64(scope: Scope, piece: Piece) -> Statement:
    """Math in float64 inside the program, cast back to the activation's dtype."""
    return lambda h, env: ops.cast(ops.tanh(ops.cast(h, "float64")) * 1.5, h.dtype) + h * 0.5


def _embedding(scope: Scope, piece: Piece) -> Statement:
    table = scope.param((scope.width, scope.width), 0.5)
    return lambda h, env: h + ops.embedding(ops.argmax(h, axis=1), table) * 0.5


def _register_all() -> None:
    for fragment in (
        Fragment("pool", draw_kind("max", "avg"), _pool),
        Fragment("gather", draw_kind("sort", "scatter", "scatter_max"), _gather),
        Fragment("where", _where_draw, _where),
        Fragment("pieces", draw_kind("split", "stack"), _pieces),
        Fragment("layer_norm", lambda d, c: {}, _layer_norm),
        Fragment("methods", draw_kind("max_dim", "transpose", "mean_keepdim", "clamp"), _methods),
        Fragment("inplace_detached", lambda d, c: {}, _inplace),
        Fragment("cross_entropy", draw_kind("mean", "sum", "none"), _cross_entropy),
        Fragment("float64", lambda d, c: {}, _float64),
        Fragment("embedding", lambda d, c: {}, _embedding),
    ):
        register(fragment)


_register_all()
