"""Fragments that switch a model between ``train()`` and ``eval()`` inside the step and between
calls (issue 40). The model is Linear -> BatchNorm1d -> Dropout (masks from the default
generator, reseeded before the first call so both builds draw the same), and a between-calls
hook calls ``model.eval()`` before the drawn calls and ``model.train()`` before the others, as
an evaluation loop between training steps would. Inside the step the model is set to train
before anything uses it (``train_first``: issue 40's step), run in eval and back in train
(``eval_inside``), left as the hook set it with a Python branch on ``model.training``
(``outside``), or trained with its batch norm frozen (``frozen_bn``: ``model[1].eval()``).
``build.Program.snapshot`` compares every module's ``training`` flags after every call; each
statement maps (batch, width) to the same shape. No mode is set in a prelude: that would write
before ``raise_early``'s check, and a compiled call that raises undoes its writes (issue 36's
atomic calls) where an eager one does not.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

import dualflow
from dualflow import nn
from dualflow.tensor.random import default_generator
from tests.tracer.fuzz.fragments import Context, Fragment, Statement, register
from tests.tracer.fuzz.scope import Scope
from tests.tracer.fuzz.spec import Piece

KINDS = ("train_first", "eval_inside", "outside", "frozen_bn")
EVAL_CALLS = ((), (1,), (1, 3), (2,), (1, 2, 3, 4, 5), (0, 2, 4))


def _draw(draw: Any, ctx: Context) -> dict[str, Any]:
    return {
        "kind": draw(st.sampled_from(KINDS)),
        "evals": draw(st.sampled_from(EVAL_CALLS)),
        "p": draw(st.sampled_from([0.0, 0.25, 0.5])),
    }


def _model(scope: Scope, piece: Piece) -> Any:
    """The model, a hook setting its mode before every call, and the default RNG compared."""
    w, evals = scope.width, piece.get("evals")
    model = scope.module(
        nn.Sequential(nn.Linear(w, w), nn.BatchNorm1d(w), nn.Dropout(piece.get("p")))
    )

    def hook(call: int) -> None:
        if call == 0:  # the dropout masks: the same for the eager and the compiled build
            dualflow.random.seed(scope.seed)
        model.train(call not in evals)

    scope.between_calls(hook)
    scope.track("default_generator", lambda: default_generator().state)
    return model


def _statement(scope: Scope, piece: Piece) -> Statement:
    kind, model = piece.get("kind"), _model(scope, piece)
    if kind == "train_first":  # as in issue 40: train() before anything uses the model

        def trained(h: Any, env: Any) -> Any:
            model.train()
            return h + model(h) * 0.5

        return trained
    if kind == "eval_inside":

        def evaluated(h: Any, env: Any) -> Any:
            model.eval()
            y = model(h)  # running statistics, no dropout
            model.train()
            return h + y * 0.25 + model(h) * 0.25

        return evaluated
    if kind == "outside":

        def as_set(h: Any, env: Any) -> Any:
            y = h + model(h) * 0.5
            return y * 1.5 if model.training else y - 0.25  # a Python read of the flag

        return as_set

    def frozen(h: Any, env: Any) -> Any:
        model.train()
        model[1].eval()  # fine-tuning with batch norm's statistics frozen
        return h + model(h) * 0.5

    return frozen


register(Fragment("mode_switch", _draw, _statement, weight=2))
