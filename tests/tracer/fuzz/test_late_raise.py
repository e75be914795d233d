"""The fuzzer's ``raise_late`` dimension: steps that raise after they wrote state (in the
forward, after ``backward``, after the optimizer's step), compiled against the eager step run
all or nothing: the same error, and every piece of state as before the call, on both sides."""

from __future__ import annotations

import pytest

from tests.tracer.fuzz import compare
from tests.tracer.fuzz.build import OPTIMIZERS
from tests.tracer.fuzz.compare import (
    compiled_as_eager,
    differences,
    lazy_differences,
    raises_late,
    run,
)
from tests.tracer.fuzz.spec import Piece, Spec

WRITES = (
    Piece.of("dropout", ratio=0.3),
    Piece.of("batchnorm"),
    Piece.of("assign", kind="write_then_read", shape="row"),
)


def _spec(optimizer: str, where: str, kind: str = "flag", penalty: float = 0.0) -> Spec:
    late = Piece.of("raise_late", kind=kind, at=2, where=where)
    return Spec(
        5,
        width=16,
        batches=(8, 8, 8, 8, 6),
        body=(*WRITES, late, Piece.of("unary", kind="tanh")),
        optimizer=optimizer,
        loss="xent",
        penalty=penalty,
    )


def _same_as_all_or_nothing_eager(spec: Spec) -> None:
    eager = run(spec)
    assert [r.outcome[0] for r in eager.records].count("raised") == 1  # call 2, flagged
    assert eager.unrestored == []  # the reference's undo put everything back
    assert compiled_as_eager(spec, eager=eager) == []


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_a_step_raising_after_its_optimizer_step_leaves_the_state_it_found(optimizer: str):
    # every optimizer's own state (moments, steps, schedules' counts) written, then the error
    _same_as_all_or_nothing_eager(_spec(optimizer, "step"))


@pytest.mark.parametrize("where", ["statement", "backward"])
def test_a_step_raising_in_its_forward_or_after_backward_leaves_the_state_it_found(where: str):
    _same_as_all_or_nothing_eager(_spec("adam", where))


@pytest.mark.parametrize("where", ["backward", "step"])
def test_a_data_dependent_late_raise_with_double_backward_by_every_path(where: str) -> None:
    spec = _spec("adam", where, kind="data", penalty=0.1)
    eager = run(spec)
    outcomes = [r.outcome[0] for r in eager.records]
    assert "raised" in outcomes and "ok" in outcomes  # the data raise on some calls only
    assert differences(spec, "O0", eager=eager) == []
    for lazy in ("always", "switching"):
        found, _ = lazy_differences(spec, "O0", lazy)
        assert found == [], lazy


def test_the_check_names_what_a_raised_call_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    # the check itself: the eager step run plainly (PyTorch's behaviour, no undo) keeps the
    # optimizer's updates of the call that raised after them, and ``unrestored`` names them
    spec = _spec("sgd", "step")
    assert raises_late(spec) and not raises_late(Spec(1))
    monkeypatch.setattr(compare, "_all_or_nothing", lambda step: step)
    kept = run(spec).unrestored
    assert all(line.startswith("call 2 raised and kept ") for line in kept)
    named = {line.split(" kept ")[1].split(":")[0] for line in kept}
    assert {"param0", "param0.grad", "generator", "module0.running_mean"} <= named


@pytest.mark.parametrize("where", ["statement", "step"])
def test_python_objects_the_step_mutates_keep_what_ran_as_in_eager(where: str) -> None:
    # a list the step appends to before it raises is the user's Python, not dualflow's state:
    # a raised call keeps the append, eager (even all or nothing) and compiled alike; the
    # parameters and the rest are still put back on both sides
    appends = Piece.of("side_effects", kind="append")
    late = Piece.of("raise_late", kind="flag", at=1, where=where)
    spec = Spec(0, width=16, batches=(8,) * 4, body=(appends, late), optimizer="sgd")
    eager = run(spec)
    assert eager.unrestored == [] and compiled_as_eager(spec, eager=eager) == []
    logged = [r.state["extra.log0.values"].shape for r in eager.records]
    assert [r.outcome[0] for r in eager.records][1] == "raised" and logged[1] == (2,)
