"""Fragments that index tensors through Python syntax inside the step (issue 40): ``h[idx]``,
``h[idx, :]``, ``h[:, idx]`` and ``h[rows, cols]`` with integer index tensors (negative entries
too) made in the step, captured by a closure or read from a module global; index tensors that a
hook rewrites in place or rebinds between calls; ``index_select``/``gather`` beside the same
picks; ``x[idx] = v``, ``x[idx] += v`` and ``x[mask] = v`` writes (into a no-grad copy or a state
buffer: dualflow's in-place writes refuse autograd graphs, as PyTorch's do on leaves); and a
boolean mask read ``h[mask]`` followed by a sum, whose output shape the data decide: a compiled
step runs eagerly from then on with one RuntimeWarning (``Fragment.falls_back``), and must still
equal eager. Each statement maps an activation (batch, width) to the same shape; row indices stay
in [-2, 1] (the smallest batch is 2).
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np
from hypothesis import strategies as st

import dualflow
from dualflow import ops
from tests.tracer.fuzz.fragments import Context, Fragment, Statement, draw_kind, register
from tests.tracer.fuzz.scope import Scope
from tests.tracer.fuzz.spec import Piece

ROWS = dualflow.tensor([1, -2, -1, 0, -1])  # a module global index tensor (the environment)
CHANGING = dualflow.tensor([0])  # rebound by the "rebind" hook: a global whose tensor changes


def _set_changing(value: Any) -> None:
    global CHANGING
    CHANGING = value


def _columns(scope: Scope, negative: bool = True) -> Any:
    """Seeded column indices (one per column, repeats allowed), from [-width, width) or not."""
    w = scope.width
    return dualflow.tensor(scope.rng.integers(-w if negative else 0, w, w))


def _syntax(scope: Scope, piece: Piece) -> Statement:
    """One way of indexing with integer tensors through ``[]``."""
    kind, w = piece.get("kind"), scope.width
    if kind == "rows_made":  # negative entries computed in the step: a rotation of the rows
        return lambda h, env: h[dualflow.arange(h.shape[0]) - 1] * 0.5 + h
    if kind == "rows_colon_global":
        return lambda h, env: h + ops.mean(h[ROWS, :], axis=0) * 0.5
    if kind == "columns":
        cols = _columns(scope)
        return lambda h, env: h[:, cols] * 0.5 + ops.tanh(h)
    if kind == "zero_d":  # a 0-d index tensor drops the dim, like an int
        last = dualflow.tensor(-1)
        return lambda h, env: h + h[:, last].unsqueeze(1) * 0.5
    if kind == "pair":  # two index tensors broadcast together: a 1-D pick
        rows, cols = dualflow.tensor([0, -1, 1]), _columns(scope)[:3]
        return lambda h, env: h + ops.sum(h[rows, cols]) * 0.1
    picks = [int(i) for i in scope.rng.integers(-w, w, w)]  # a Python list with negatives
    return lambda h, env: h[:, picks] * 0.5 + h


def _changing_draw(draw: Any, ctx: Context) -> dict[str, Any]:
    kind = draw(st.sampled_from(["rewrite", "rebind"]))
    return {"kind": kind, "change_at": draw(st.integers(1, 4))}


def _changing(scope: Scope, piece: Piece) -> Statement:
    """``h[:, idx]`` with a captured index tensor whose values a hook rewrites in place
    (``copy_``: a plan reads the new values), or a module global rebound to another index
    tensor (the environment changed: a retrace), on one call."""
    change_at, first = piece.get("change_at"), _columns(scope).numpy()
    then = np.roll(first, 1) - 1  # other indices, still in [-width - 1, width - 1)
    then[then < -scope.width] += scope.width
    captured = dualflow.tensor(first.copy())

    def hook(call: int) -> None:
        if call == 0:  # both builds start from the same global
            _set_changing(dualflow.tensor(first.copy()))
            captured.copy_(dualflow.tensor(first.copy()))
        elif call == change_at and piece.get("kind") == "rewrite":
            captured.copy_(dualflow.tensor(then))
        elif call == change_at:
            _set_changing(dualflow.tensor(then))

    scope.between_calls(hook)
    if piece.get("kind") == "rewrite":
        return lambda h, env: h[:, captured] * 0.5 + h
    return lambda h, env: h[:, CHANGING] * 0.5 + h


def _compare(scope: Scope, piece: Piece) -> Statement:
    """The same columns picked four ways: ``h[:, idx]``, ``h[:, idx - width]`` (negative
    entries), ``index_select`` and ``gather`` (neither takes negative indices, as in PyTorch)."""
    cols, w = _columns(scope, negative=False), scope.width

    def statement(h: Any, env: Any) -> Any:
        spread = cols.unsqueeze(0).expand(h.shape[0], w)
        picked = h[:, cols] + h[:, cols - w] + h.index_select(1, cols) + h.gather(1, spread)
        return picked * 0.125 + h

    return statement


def _written(h: Any, kind: str, rows: Any, cols: Any) -> Any:
    """A no-grad copy of ``h`` written through ``[]`` (the write leaves the autograd graph)."""
    with dualflow.no_grad():
        c = h.clone()
        if kind == "put":
            c[rows] = c[rows.flip(0)] * 0.5
            c[:, cols] = 0.25
        elif kind == "augmented":
            c[rows] += 1.0
            c[:, cols] *= 0.5
        else:  # a boolean mask write is a where: it compiles
            c[c > 0.5] = 0.5
    return h + ops.tanh(c) * 0.5


def _write(scope: Scope, piece: Piece) -> Statement:
    """``x[idx] = v``, ``x[idx] += v`` or ``x[mask] = v`` on a no-grad copy of ``h``, or a state
    buffer's columns updated through ``buf[cols] = ...`` (a state write a plan makes)."""
    kind, cols = piece.get("kind"), _columns(scope)
    if kind != "buffer":
        rows = dualflow.tensor([0, -1])
        return lambda h, env: _written(h, kind, rows, cols)
    buf = scope.buffer((scope.width,), 0.1)

    def statement(h: Any, env: Any) -> Any:
        buf[cols] = buf[cols] * 0.9 + ops.mean(h, axis=0).detach()[cols] * 0.1
        return h + buf

    return statement


def _mask_draw(draw: Any, ctx: Context) -> dict[str, Any]:
    return {
        "kind": draw(st.sampled_from(["index", "masked_select"])),
        "from_call": draw(st.sampled_from([0, 1, 2, 3])),
        "at": draw(st.sampled_from([0.0, 0.5])),
    }


def _mask_read(scope: Scope, piece: Piece) -> Statement:
    """From call ``from_call`` on (a flag a hook sets), ``h[h > at]`` (or ``masked_select``)
    summed: its length depends on the data, so a compiled step gives up tracing at that call and
    runs eagerly from then on (one RuntimeWarning). ``scope.eager_reasons`` tells the comparison
    eager took that path."""
    from_call, at = piece.get("from_call"), piece.get("at")
    select = piece.get("kind") == "masked_select"
    flag = types.SimpleNamespace(on=False)
    scope.between_calls(lambda call: setattr(flag, "on", call >= from_call))

    def statement(h: Any, env: Any) -> Any:
        if not flag.on:
            return h
        scope.eager_reasons.append("boolean mask read")
        picked = h.masked_select(h > at) if select else h[h > at]
        return h + ops.sum(picked) * (0.1 / h.shape[1])

    return statement


def _register_all() -> None:
    syntax = ("rows_made", "rows_colon_global", "columns", "zero_d", "pair", "list")
    for fragment in (
        Fragment("index_syntax", draw_kind(*syntax), _syntax, weight=2),
        Fragment("index_changing", _changing_draw, _changing),
        Fragment("index_compare", lambda draw, ctx: {}, _compare),
        Fragment("index_write", draw_kind("put", "augmented", "mask", "buffer"), _write),
        Fragment("mask_read", _mask_draw, _mask_read, falls_back=True),
    ):
        register(fragment)


_register_all()
