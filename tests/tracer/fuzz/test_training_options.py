"""The fuzzer's training options beyond the optimizer's own update: an LR schedule stepped
between calls (the compiled step must read each new lr), gradients clipped inside the step, and
a gradient penalty whose grad() asks for every leaf (nothing to prune)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dualflow.autograd import engine
from tests.tracer.fuzz.build import CLIPS, SCHEDULES, build
from tests.tracer.fuzz.compare import compiled_as_eager, differences
from tests.tracer.fuzz.spec import Piece, Spec

BODY = (
    Piece("unary", (("kind", "tanh"),)),
    Piece("batchnorm"),
    Piece("matmul", (("kind", "linear"),)),
)


def _spec(optimizer: str) -> Spec:
    return Spec(7, width=8, batches=(4, 4, 4, 4, 6), body=BODY, optimizer=optimizer, loss="xent")


def _run_eagerly(spec: Spec) -> tuple[list[float], object]:
    """Every call of ``spec``'s program in eager mode; the lr each call ran with."""
    program, rates = build(spec), []
    for call in range(spec.calls):
        program.before(call)
        rates.append(float(program.optimizer.param_groups[0]["lr"]))  # a 0-d tensor, updated
        program.step(*program.inputs(call))
    return rates, program


@pytest.mark.parametrize("optimizer", sorted(SCHEDULES))
def test_a_schedule_between_calls_changes_the_lr_and_compiled_steps_follow(optimizer: str):
    rates, _ = _run_eagerly(_spec(optimizer))
    assert all(a != b for a, b in itertools.pairwise(rates))  # a new lr at every call
    if optimizer == "sgd_steplr":
        assert rates == pytest.approx([0.05 * 0.5**k for k in range(5)])
    for passes in ("O0", "exact"):
        assert differences(_spec(optimizer), passes) == [], passes


@pytest.mark.parametrize("optimizer", sorted(CLIPS))
def test_gradients_clipped_inside_the_step_match_eager(optimizer: str) -> None:
    _, program = _run_eagerly(_spec(optimizer))
    grads = [p.grad.numpy() for p in program.scope.params]
    if optimizer == "adam_clip_norm":
        assert np.sqrt(sum(float((g * g).sum()) for g in grads)) <= 0.5 * (1 + 1e-5)
    else:
        assert max(float(np.abs(g).max()) for g in grads) <= np.float32(0.05)  # in float32
    for passes in ("O0", "exact"):
        assert differences(_spec(optimizer), passes) == [], passes


@pytest.mark.parametrize("every_leaf", [False, True])
def test_a_penalty_over_every_leaf_prunes_nothing_and_compiles_as_eager(
    every_leaf: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = Spec(**{**_spec("adam").__dict__, "penalty": 0.1, "every_leaf": every_leaf})
    pruned: list[bool] = []
    reaching = engine._reaching

    def spy(outputs: object, targets: dict) -> object:
        reach = reaching(outputs, targets)
        pruned.append(reach is not None)
        return reach

    monkeypatch.setattr(engine, "_reaching", spy)
    _run_eagerly(spec)
    assert pruned == [not every_leaf] * spec.calls
    assert compiled_as_eager(spec) == []
