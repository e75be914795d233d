"""The built-in fragments: elementwise math, broadcasting, reductions, matmul, views, clip,
activations, softmax, dropout, batch norm, state writes with ``ops.assign``, state read through
an alias made in the step, linear+BN and 3x3 convolutions.

Every statement maps an activation of shape (batch, width) to the same shape, so fragments
compose in any order and the batch may change between calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

import dualflow
from dualflow import nn, ops
from tests.tracer.fuzz.fragments import Context, Fragment, Statement, register
from tests.tracer.fuzz.scope import Scope
from tests.tracer.fuzz.spec import Piece

SCALARS = (0.5, 1.5, -0.7, 2.0, 0.1)

UNARY: dict[str, Callable[[Any], Any]] = {
    "tanh": ops.tanh,
    "sigmoid": ops.sigmoid,
    "relu": ops.relu,
    "elu": ops.elu,
    "leaky_relu": ops.leaky_relu,
    "silu": ops.silu,
    "softplus": ops.softplus,
    "gelu": ops.gelu,
    "exp": lambda h: ops.exp(ops.clip(h, -4.0, 4.0)),
    "log1p": lambda h: ops.log1p(ops.abs(h)),
    "sqrt": lambda h: ops.sqrt(h * h + 0.1),
    "rsqrt": lambda h: ops.rsqrt(h * h + 1.0),
    "sin": ops.sin,
    "cos": ops.cos,
    "power": lambda h: (h * h + 0.5) ** 0.75,  # a power other than 2: numpy's pow everywhere
    "square": lambda h: h**2 * 0.5,  # eager's ``x ** 2`` is numpy's square
}

ARITH: dict[str, Callable[[Any, float, float], Any]] = {
    "affine": lambda h, a, b: h * a + b,
    "ratio": lambda h, a, b: (h - a) / (1.0 + h * h),
    "leaky": lambda h, a, b: ops.maximum(h, h * a),
    "bounded": lambda h, a, b: ops.minimum(h, abs(a)) + ops.maximum(h, -abs(b)),
    "poly": lambda h, a, b: h * h * a - h + b,
    "identity": lambda h, a, b: ops.negative(-((h * 1.0 + 0.0) / 1.0 - 0.0)),  # fold's rules
    "chain": lambda h, a, b: ((h + a) * (h - b)) * 0.25 + h,
}

REDUCE: dict[str, Callable[[Any], Any]] = {
    "center_rows": lambda h: h - ops.mean(h, axis=1, keepdims=True),
    "center_cols": lambda h: h - ops.mean(h, axis=0),
    "max_scale": lambda h: h / (1.0 + ops.max(ops.abs(h), axis=0)),
    "sum_all": lambda h: h + ops.sum(ops.tanh(h) * h) * (0.1 / _numel(h)),  # blocked fused sum
    "sumsq": lambda h: h + ops.sum((h - 0.5) * (h + 0.5)) * (0.1 / _numel(h)),  # numba sum
    "sum_rows": lambda h: h * ops.sum(h, axis=1, keepdims=True) * 0.01,
    "norm": lambda h: h * ops.rsqrt(ops.mean(h * h, axis=1, keepdims=True) + 1.0),
    "mean_all": lambda h: h - ops.mean(h),
}


def _numel(h: Any) -> int:
    return int(h.shape[0]) * int(h.shape[1])


def _pick(options: Any) -> Callable[[Any, Context], dict[str, Any]]:
    """A draw of one parameter ``kind`` from ``options``."""
    return lambda draw, ctx: {"kind": draw(st.sampled_from(sorted(options)))}


def _unary(scope: Scope, piece: Piece) -> Statement:
    fn = UNARY[piece.get("kind")]
    return lambda h, env: fn(h)


def _arith_draw(draw: Any, ctx: Context) -> dict[str, Any]:
    kind = draw(st.sampled_from(sorted(ARITH)))
    return {"kind": kind, "a": draw(st.sampled_from(SCALARS)), "b": draw(st.sampled_from(SCALARS))}


def _arith(scope: Scope, piece: Piece) -> Statement:
    fn, a, b = ARITH[piece.get("kind")], piece.get("a"), piece.get("b")
    return lambda h, env: fn(h, a, b)


def _broadcast_draw(draw: Any, ctx: Context) -> dict[str, Any]:
    op = draw(st.sampled_from(["add", "multiply", "subtract", "divide", "maximum"]))
    return {"op": op, "shape": draw(st.sampled_from(["row", "row2", "scalar"]))}


def _broadcast(scope: Scope, piece: Piece) -> Statement:
    shape = {"row": (scope.width,), "row2": (1, scope.width), "scalar": ()}[piece.get("shape")]
    p, op = scope.param(shape, 0.5, 0.5), piece.get("op")
    if op == "divide":
        return lambda h, env: h / (1.0 + p * p)
    fn = getattr(ops, op)
    return lambda h, env: fn(h, p)


def _matmul(scope: Scope, piece: Piece) -> Statement:
    w, kind = scope.width, piece.get("kind")
    if kind == "linear":
        weight, bias = scope.param((w, w), w**-0.5), scope.param((w,), 0.1)
        return lambda h, env: ops.linear(h, weight, bias)
    if kind == "gram":
        return lambda h, env: h + (h @ (ops.transpose(h) @ h)) * (0.01 / _numel(h))
    m = scope.param((w, w), w**-0.5)
    if kind == "left":  # a transposed operand and a transposed (F-ordered view) result
        return lambda h, env: ops.transpose(m @ ops.transpose(h))
    return lambda h, env: h @ m


def _transpose_pair(scope: Scope, piece: Piece) -> Statement:
    """``transpose(f(transpose(h)))``: ``f`` sees an F-ordered view (issue 20's pattern)."""
    kind = piece.get("kind")
    column = scope.param((scope.width, 1), 0.5)
    inner = {
        "scale": lambda t: t * 1.5,
        "tanh": ops.tanh,
        "column": lambda t: t + column,
        "center": lambda t: t - ops.mean(t, axis=1, keepdims=True),
        "softmax": lambda t: ops.softmax(t, axis=0),
    }[kind]
    return lambda h, env: ops.transpose(inner(ops.transpose(h)))


def _reshape_draw(draw: Any, ctx: Context) -> dict[str, Any]:
    kinds = ["flat", "pairs"] if ctx.width % 2 == 0 else ["flat"]
    return {"kind": draw(st.sampled_from(kinds))}


def _reshape(scope: Scope, piece: Piece) -> Statement:
    if piece.get("kind") == "flat":
        return lambda h, env: ops.reshape(ops.tanh(ops.reshape(h, (-1,))) * 2.0, h.shape)

    def pairs(h: Any, env: Any) -> Any:
        p = ops.reshape(h, (-1, 2))
        return ops.reshape(p - ops.mean(p, axis=1, keepdims=True) * 0.5, h.shape)

    return pairs


def _view(scope: Scope, piece: Piece) -> Statement:
    kind, w = piece.get("kind"), scope.width
    if kind == "flip":
        return lambda h, env: ops.flip(h, 1) * 0.5 + h
    if kind == "roll":
        k = max(1, w // 3)
        return lambda h, env: ops.concat([h[:, k:], h[:, :k]], axis=1)
    if kind == "interleave" and w % 2 == 0:
        return lambda h, env: ops.concat([h[:, ::2], h[:, 1::2]], axis=1)
    return lambda h, env: h[::-1] * 2.0 - h  # a negative-stride view into an elementwise op


def _clip_draw(draw: Any, ctx: Context) -> dict[str, Any]:
    lo, hi = draw(st.sampled_from([(-1.0, 1.0), (-0.5, 2.0), (None, 1.0), (0.0, None)]))
    return {"lo": lo, "hi": hi}


def _clip(scope: Scope, piece: Piece) -> Statement:
    lo, hi = piece.get("lo"), piece.get("hi")
    return lambda h, env: ops.clip(h, lo, hi)


def _softmax_draw(draw: Any, ctx: Context) -> dict[str, Any]:
    kind = draw(st.sampled_from(["softmax", "log_softmax", "both"]))
    # "t": the last axis of a transposed view (a layout a plan may hand over otherwise than eager)
    return {"kind": kind, "axis": draw(st.sampled_from([-1, 0, "t"]))}


def _softmax(scope: Scope, piece: Piece) -> Statement:
    kind, axis = piece.get("kind"), piece.get("axis")
    if kind == "both":
        apply = lambda h, a: ops.softmax(h, a) + ops.log_softmax(h, a) * 0.1  # noqa: E731
    else:
        apply = getattr(ops, kind)
    if axis == "t":
        return lambda h, env: ops.transpose(apply(ops.transpose(h), -1))
    return lambda h, env: apply(h, axis)


def _dropout(scope: Scope, piece: Piece) -> Statement:
    ratio = piece.get("ratio")
    return lambda h, env: ops.dropout(h, ratio, train=True, generator=scope.generator)


def _batchnorm(scope: Scope, piece: Piece) -> Statement:
    """BatchNorm1d over the (N, W) rows (numpy's form), or over the same values as (1, W, N)
    planes: the same statistics, through the numba kernel that runs (N, C, ...) inputs."""
    bn = scope.module(nn.BatchNorm1d(scope.width))
    if piece.get("kind", "rows") == "rows":
        return lambda h, env: bn(h)

    def planes(h: Any, env: Any) -> Any:
        width_first = ops.transpose(h)
        out = bn(ops.reshape(width_first, (1, *width_first.shape)))
        return ops.transpose(ops.reshape(out, width_first.shape))

    return planes


def _linear_bn(scope: Scope, piece: Piece) -> Statement:
    """Linear then BatchNorm1d: in an eval program, what ``fold_bn`` folds."""
    linear = scope.module(nn.Linear(scope.width, scope.width))
    bn = scope.module(nn.BatchNorm1d(scope.width))
    return lambda h, env: bn(linear(h))


def _conv(scope: Scope, piece: Piece) -> Statement:
    """The activation as one 1-channel image through three 3x3 convolutions: the middle one
    (16 -> 16 channels) runs the Winograd kernels from 256 tiles (a 32x32 activation) up, the
    others im2col + GEMM (1 channel in or out); a per-channel bias broadcasts over the first
    one's planes (a fused kernel's loop nest)."""
    lift, bias = scope.param((16, 1, 3, 3), 1 / 3), scope.param((1, 16, 1, 1), 0.5)
    mix, back = scope.param((16, 16, 3, 3), 1 / 12), scope.param((1, 16, 3, 3), 1 / 12)
    pad = piece.get("pad")

    def statement(h: Any, env: Any) -> Any:
        image = ops.relu(ops.conv2d(ops.reshape(h, (1, 1, *h.shape)), lift, pad=1) + bias)
        image = ops.tanh(ops.conv2d(image, mix, pad=pad))
        out = ops.conv2d(image, back, pad=2 - pad)  # back to the activation's shape
        return h + ops.reshape(out, h.shape) * 0.5

    return statement


def _alias_draw(draw: Any, ctx: Context) -> dict[str, Any]:
    return {"kind": draw(st.sampled_from(["detach", "data"])), "change_at": draw(st.integers(1, 4))}


def _alias_read(scope: Scope, piece: Piece) -> Statement:
    """A state buffer read through an alias made inside the step (``detach()`` or ``.data``)
    whose data a hook rebinds between calls (``buf.data = ...``): the step reads the new data."""
    buf = scope.buffer((scope.width,), 0.1)
    start, change_at = buf.numpy().copy(), piece.get("change_at")

    def hook(call: int) -> None:
        if call == change_at:
            buf.data = dualflow.tensor(start * 3.0 + 0.5)

    scope.between_calls(hook)
    read = (lambda t: t.detach()) if piece.get("kind") == "detach" else (lambda t: t.data)
    return lambda h, env: h * (1.0 + read(buf))


def _assign_draw(draw: Any, ctx: Context) -> dict[str, Any]:
    kind = draw(st.sampled_from(["write_then_read", "read_then_write"]))
    return {"kind": kind, "shape": draw(st.sampled_from(["row", "row2"]))}


def _assign(scope: Scope, piece: Piece) -> Statement:
    """A state buffer written with ``ops.assign`` (an update) and read before or after."""
    shape = (scope.width,) if piece.get("shape") == "row" else (1, scope.width)
    buf = scope.buffer(shape, 0.1)

    def write_then_read(h: Any, env: Any) -> Any:
        ops.assign(buf, (buf * 0.9 + ops.mean(h, axis=0) * 0.1).detach())
        return h + buf

    def read_then_write(h: Any, env: Any) -> Any:
        y = h * (1.0 + buf)
        ops.assign(buf, (buf + ops.mean(y, axis=0) * 0.1).detach())
        return y

    return write_then_read if piece.get("kind") == "write_then_read" else read_then_write


def _register_all() -> None:
    for fragment in (
        Fragment("unary", _pick(UNARY), _unary, weight=3),
        Fragment("arith", _arith_draw, _arith, weight=3),
        Fragment("broadcast", _broadcast_draw, _broadcast, weight=2),
        Fragment("reduce", _pick(REDUCE), _reduce_statement, weight=2),
        Fragment("matmul", _pick(["param", "linear", "gram", "left"]), _matmul, weight=2),
        Fragment(
            "transpose_pair",
            _pick(["scale", "tanh", "column", "center", "softmax"]),
            _transpose_pair,
            weight=2,
        ),
        Fragment("reshape", _reshape_draw, _reshape),
        Fragment("view", _pick(["flip", "roll", "interleave", "rows"]), _view),
        Fragment("clip", _clip_draw, _clip),
        Fragment("softmax", _softmax_draw, _softmax),
        Fragment("dropout", lambda d, c: {"ratio": d(st.sampled_from([0.1, 0.3, 0.5]))}, _dropout),
        Fragment("batchnorm", _pick(["rows", "planes"]), _batchnorm),
        Fragment("linear_bn", lambda d, c: {}, _linear_bn),
        Fragment("conv", lambda d, c: {"pad": d(st.sampled_from([1, 2]))}, _conv),
        Fragment("assign", _assign_draw, _assign, weight=2),
        Fragment("alias_read", _alias_draw, _alias_read),
    ):
        register(fragment)


def _reduce_statement(scope: Scope, piece: Piece) -> Statement:
    fn = REDUCE[piece.get("kind")]
    return lambda h, env: fn(h)


_register_all()
