"""A step that raises after it wrote state: in the forward after earlier statements' writes
(batch-norm statistics, assigned buffers, the dropout generator), after ``backward`` wrote the
gradients, or after the optimizer's ``step`` wrote the parameters and its state.

A compiled call is all or nothing (issue 36): one that raises leaves every piece of state as it
found it, where a plain eager call keeps what ran before the error (PyTorch's behaviour). The
comparison's eager side therefore runs such programs with dualflow's undo log
(``run_undoably``, the promise compiled calls keep), and checks on both sides that a call that
raised left the state it found (``compare.unrestored``): the eager reference's undo, and the
compiled call's, against the state before the call.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.tracer.fuzz.environment import raising_check
from tests.tracer.fuzz.fragments import Context, Fragment, Statement, register
from tests.tracer.fuzz.scope import Env, Scope
from tests.tracer.fuzz.spec import Piece

WHERE = {"train": ("statement", "backward", "step"), "eval": ("statement",)}


def _draw(draw: Any, ctx: Context) -> dict[str, Any]:
    return {
        "kind": draw(st.sampled_from(["flag", "data"])),
        "at": draw(st.integers(1, 4)),
        "where": draw(st.sampled_from(WHERE[ctx.mode])),
    }


def _raising(scope: Scope, piece: Piece) -> Statement:
    """The statement raises where it stands, or registers the check after ``backward`` or the
    optimizer's step (``Scope.late``) and passes the activation on."""
    check = raising_check(scope, piece, f"after the step's writes, {piece.get('where')}")
    if piece.get("where") != "statement":
        scope.late(piece.get("where"), check)
        return lambda h, env: h

    def statement(h: Any, env: Env) -> Any:
        check(env)
        return h

    return statement


register(Fragment("raise_late", _draw, _raising, raises_late=True))
