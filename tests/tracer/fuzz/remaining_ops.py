"""Fragments for the registered ops no other fragment module drew: indexing with integer tensors,
padding, products, normal samples from the program's generator, ``arange``/``full`` constants,
``clone`` (and an in-place write of the copy), ``expm1``, ``atan``, ``log``, tanh-approximated GELU,
``stop_gradient``, ``flip``, ``argmin`` and ``<=`` (ops a sweep of eager fuzz runs never reached;
issue 18, eleventh session), and ``sum_to`` called directly (its identity form too). Each
statement maps an activation (batch, width) to the same shape, like ``library``'s.
"""

from __future__ import annotations

from typing import Any

import dualflow
from dualflow import ops
from dualflow.nn import functional as F
from tests.tracer.fuzz.fragments import Fragment, Statement, draw_kind, register
from tests.tracer.fuzz.scope import Scope
from tests.tracer.fuzz.spec import Piece


def _index(scope: Scope, piece: Piece) -> Statement:
    """``h[:, cols]`` with a constant integer tensor holding repeats (its gradient adds the
    repeats up), or ``h[perm]`` with the rows' order computed in the step (``argsort``)."""
    if piece.get("kind") == "rows":
        return lambda h, env: h[ops.argsort(h[:, 0], axis=0)] * 0.5 + h
    cols = dualflow.tensor(scope.rng.integers(0, scope.width, scope.width))
    return lambda h, env: h[:, cols] * 0.5 + ops.tanh(h)


def _pad(scope: Scope, piece: Piece) -> Statement:
    """A central difference along the rows over a column padded on each side (numpy's
    ``constant``, ``edge`` or ``reflect``), or ``F.pad`` of the last dim (PyTorch's order)."""
    mode = piece.get("kind")
    if mode == "functional":
        return lambda h, env: h + F.pad(h, (1, 0))[:, :-1] * 0.5

    def statement(h: Any, env: Any) -> Any:
        padded = ops.pad(h, ((0, 0), (1, 1)), mode=mode)
        return h + (padded[:, 2:] - padded[:, :-2]) * 0.5

    return statement


def _prod(scope: Scope, piece: Piece) -> Statement:
    """Products of factors in [0.9, 1.1] (never zero: the gradient divides by none), over the
    row or over the batch."""
    axis = 1 if piece.get("kind") == "rows" else 0
    return lambda h, env: h * ops.prod(1.0 + 0.1 * ops.tanh(h), axis=axis, keepdims=True)


def _randn(scope: Scope, piece: Piece) -> Statement:
    """Noise from ``randn`` with the program's generator (its state is compared every call)."""
    generator = scope.generator
    return lambda h, env: h + dualflow.randn(*h.shape, generator=generator, dtype=h.dtype) * 0.1


def _constants(scope: Scope, piece: Piece) -> Statement:
    """``arange`` and ``full`` made in the step (constants a trace may fold)."""

    def statement(h: Any, env: Any) -> Any:
        ramp = dualflow.arange(h.shape[1], dtype=h.dtype) * (1.0 / h.shape[1])
        return h * ramp + dualflow.full(tuple(h.shape), -0.25, dtype=h.dtype)

    return statement


def _clone(scope: Scope, piece: Piece) -> Statement:
    """``clone`` read beside its original, or cloned and written in place under ``no_grad``
    (dualflow records no in-place op for autograd, so the copy leaves the graph)."""
    if piece.get("kind") == "plain":
        return lambda h, env: ops.tanh(h.clone()) * 0.5 + h

    def statement(h: Any, env: Any) -> Any:
        with dualflow.no_grad():
            c = h.clone()
            c.mul_(0.5).add_(h)
        return ops.tanh(c) + h

    return statement


MATH = {
    "expm1": lambda h: ops.expm1(ops.clip(h, -3.0, 3.0)),
    "atan": ops.atan,
    "log": lambda h: ops.log(h * h + 1.0),
    "gelu_tanh": lambda h: F.gelu(h, approximate="tanh"),
}


def _math(scope: Scope, piece: Piece) -> Statement:
    fn = MATH[piece.get("kind")]
    return lambda h, env: fn(h)


def _stop_gradient(scope: Scope, piece: Piece) -> Statement:
    """A factor the gradient does not flow through (``stop_gradient``) times one it does."""
    return lambda h, env: h * ops.stop_gradient(ops.sigmoid(h)) + h * 0.5


def _order(scope: Scope, piece: Piece) -> Statement:
    """``flip`` of the columns, the rows' ``min(dim)`` (values and ``argmin`` indices), or a
    ``<=`` mask choosing between two branches."""
    kind = piece.get("kind")
    if kind == "flip":
        return lambda h, env: h + ops.flip(ops.tanh(h), axis=1) * 0.5

    if kind == "min_dim":

        def centred(h: Any, env: Any) -> Any:
            values, indices = h.min(1)
            return h - values.unsqueeze(1) * 0.5 + ops.cast(indices.unsqueeze(1), h.dtype) * 0.01

        return centred
    return lambda h, env: ops.where(h <= 0.2, h * 0.5, ops.sigmoid(h))


def _sum_to(scope: Scope, piece: Piece) -> Statement:
    """``sum_to`` of an elementwise value: over the batch to (1, width) or over the row to
    (batch, 1), added back; or to its own shape (``identity``: sum_to returns the value itself,
    read again after new values were made, which a memory plan taking sum_to's result for new
    memory would have written over the value's buffer)."""
    kind = piece.get("kind")
    if kind == "identity":

        def identity(h: Any, env: Any) -> Any:
            same = ops.sum_to(h * 0.5 + ops.tanh(h), tuple(h.shape))
            later = ops.sigmoid(h) * 2.0 - ops.exp(h * -0.5)
            return same * later + same

        return identity

    def statement(h: Any, env: Any) -> Any:
        shape = (1, h.shape[1]) if kind == "batch" else (h.shape[0], 1)
        return h + ops.sum_to(ops.tanh(h) * h, shape) * 0.1

    return statement


def _register_all() -> None:
    for fragment in (
        Fragment("index", draw_kind("columns", "rows"), _index),
        Fragment("pad", draw_kind("constant", "edge", "reflect", "functional"), _pad),
        Fragment("prod", draw_kind("rows", "batch"), _prod),
        Fragment("randn", lambda draw, ctx: {}, _randn),
        Fragment("constants", lambda draw, ctx: {}, _constants),
        Fragment("clone", draw_kind("plain", "no_grad_inplace"), _clone),
        Fragment("math", draw_kind(*sorted(MATH)), _math),
        Fragment("stop_gradient", lambda draw, ctx: {}, _stop_gradient),
        Fragment("order", draw_kind("flip", "min_dim", "less_equal"), _order),
        Fragment("sum_to", draw_kind("batch", "row", "identity"), _sum_to),
    ):
        register(fragment)


_register_all()
