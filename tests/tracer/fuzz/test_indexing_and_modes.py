"""indexing_syntax's and modes' fragments (issue 40): integer-tensor indexing through ``[]``
(made in the step, captured, module globals, rewritten or rebound between calls, negative
entries), ``index_select``/``gather`` beside it, ``[]`` writes, a boolean mask read that makes the
compiled step run eagerly, and ``model.train()``/``model.eval()`` inside the step and between
calls. Eager runs the ops they were written for; compiled at O0 and with the exact pipeline gives
eager's bits (O2 keeps to its rules), a boolean mask read falls back with exactly one warning and
still equals eager, and mode flips between calls do not retrace a step that sets its mode first.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import dualflow.ops.dispatch as dispatch
from dualflow import ops
from dualflow.ops.dispatch import tracing
from tests.tracer.fuzz import fragments
from tests.tracer.fuzz.compare import assert_matches_eager, compiled_as_eager, differences, run
from tests.tracer.fuzz.fragments import Fragment, Statement
from tests.tracer.fuzz.scope import Scope
from tests.tracer.fuzz.spec import Piece, Spec, fixed_program

SYNTAX = ("rows_made", "rows_colon_global", "columns", "zero_d", "pair", "list")
BODY = (
    *(Piece.of("index_syntax", kind=kind) for kind in SYNTAX),
    Piece.of("mode_switch", kind="train_first", evals=(1, 3), p=0.25),
    Piece.of("index_changing", kind="rewrite", change_at=2),
    Piece.of("index_compare"),
    Piece.of("mode_switch", kind="eval_inside", evals=(2,), p=0.5),
    Piece.of("index_changing", kind="rebind", change_at=1),
    *(Piece.of("index_write", kind=kind) for kind in ("put", "augmented", "mask", "buffer")),
    Piece.of("mode_switch", kind="frozen_bn", evals=(), p=0.0),
    Piece.of("mode_switch", kind="outside", evals=(1, 2), p=0.25),
    Piece.of("mask_read", kind="index", from_call=5, at=0.0),  # the last call runs eagerly
)
OPS_WRITTEN_FOR = {
    "getitem_array",
    "arange",
    "take_along_axis",
    "assign",
    "where",
    "batch_norm",
    "dropout_mask",
}


def _spec(dtype: str = "float32", mode: str = "train", penalty: float = 0.1) -> Spec:
    """Six calls, the last with another batch (and the mask read: compiled gives up there)."""
    spec = fixed_program(5, BODY, 7, dtype, mode, penalty)
    return Spec(**{**spec.__dict__, "batches": (6, 6, 6, 6, 6, 9)})


def test_the_fragments_run_the_ops_they_were_written_for(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: Counter[str] = Counter()
    eager_apply = dispatch._default_apply

    def counting(op: Any, args: tuple, attrs: dict[str, Any]) -> Any:
        seen[op.name] += 1
        return eager_apply(op, args, attrs)

    monkeypatch.setattr(dispatch, "_default_apply", counting)
    records = run(_spec()).records
    assert set(seen) >= OPS_WRITTEN_FOR, OPS_WRITTEN_FOR - set(seen)
    assert seen["getitem_array_grad"] > 0  # the indexing's backward (a scatter-add)
    # every module's flags are compared: "outside" leaves its model in eval on calls 1 and 2
    flags = [r.state["module3.training"] for r in records]
    assert flags == [[True] * 4, [False] * 4, [False] * 4, [True] * 4, [True] * 4, [True] * 4]
    assert records[0].state["module2.training"] == [True, True, False, True]  # frozen_bn


@pytest.mark.parametrize(
    ("dtype", "mode", "penalty"),
    [
        ("float32", "train", 0.1),  # the default run: the penalty's double backward too
        pytest.param("float64", "train", 0.0, marks=pytest.mark.slow),
        pytest.param("float32", "eval", 0.0, marks=pytest.mark.slow),
    ],
)
def test_indexing_and_mode_fragments_in_one_program_are_bit_identical(
    dtype: str, mode: str, penalty: float
) -> None:
    spec = _spec(dtype, mode, penalty)
    assert_matches_eager(spec)
    # calls 2 and 4 ran plans before the mask read gave up on call 5 (call 3 retraced: the
    # "outside" step reads the training flag the hook set back to True)
    stats = run(spec, "O0").fn.stats()
    assert (stats.plan_runs, stats.eager_fallbacks) == (2, 1), stats


def test_mode_flips_between_calls_do_not_retrace_a_step_that_sets_its_mode_first() -> None:
    """Issue 40: ``model.train()`` first in the step, ``model.eval()`` before calls 1 and 3."""
    piece = Piece.of("mode_switch", kind="train_first", evals=(1, 3), p=0.25)
    spec = Spec(2, width=6, batches=(6,) * 6, body=(piece,), optimizer="adam")
    assert differences(spec, "O0") == []
    stats = run(spec, "O0").fn.stats()
    # the first trace is single-use (Adam's state is born in it), the second serves every call
    assert (stats.traces, stats.plan_runs, stats.eager_fallbacks) == (2, 4, 0)


@pytest.mark.parametrize(
    ("kind", "from_call", "plans"), [("index", 0, 0), ("index", 3, 1), ("masked_select", 3, 1)]
)
def test_a_boolean_mask_read_falls_back_once_and_equals_eager(
    kind: str, from_call: int, plans: int
) -> None:
    # call 0's trace is single-use (Adam's state is born in it): call 1 traces again, call 2
    # runs the plan, and the mask read from call 3 on gives up tracing
    body = (
        Piece.of("index_syntax", kind="rows_made"),
        Piece.of("mask_read", kind=kind, from_call=from_call, at=0.0),
    )
    spec = Spec(4, width=5, batches=(6,) * 4, body=body, optimizer="adam")
    assert compiled_as_eager(spec) == []
    compiled = run(spec, "O0")
    assert len(compiled.fallbacks) == 1 and "lazy re-execution from now on" in compiled.fallbacks[0]
    stats = compiled.fn.stats()
    assert (stats.eager_fallbacks, stats.plan_runs) == (spec.calls - from_call, plans)


def test_a_mask_read_eager_never_reached_expects_plans() -> None:
    spec = Spec(4, width=5, body=(Piece.of("mask_read", kind="index", from_call=9, at=0.5),))
    assert differences(spec, "O0") == []
    compiled = run(spec, "O0")
    assert compiled.fallbacks == [] and compiled.fn.stats().plan_runs == 3


def test_a_fallback_eager_did_not_take_is_a_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fragment allowed to fall back whose mask read happens only when traced: the compiled
    step falls back though eager never took that path, and the comparison says so."""

    def make(scope: Scope, piece: Piece) -> Statement:
        return lambda h, env: h + ops.sum(h[h > 0.0]) * 0.1 if tracing() is not None else h

    monkeypatch.setattr(fragments, "_REGISTRY", dict(fragments.registry()))
    fragments.register(Fragment("traced_mask", lambda draw, ctx: {}, make, falls_back=True))
    found = differences(Spec(6, body=(Piece.of("traced_mask"),)), "O0")
    assert any("fell back to eager" in line for line in found), found
