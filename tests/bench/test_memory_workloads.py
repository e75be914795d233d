"""The memory workloads: checkpointed ResNet-18 gives the plain step's losses and parameters bit
for bit (float32) eagerly and compiled; the autocast MLP row compiles to the eager values; the
bench's issue-42 lines compare each memory row with the plain batch-64 row of its mode."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow.bench.harness import Measurement
from dualflow.bench.memory_workloads import (
    BATCH,
    build_mlp_autocast,
    build_resnet18_b64,
    build_resnet18_checkpoint,
    build_resnet18_remat,
    memory_goal_lines,
)
from dualflow.bench.modes import prepare
from dualflow.bench.workloads import WORKLOADS


def _run(build, compiled: bool, steps: int = 2, **kw) -> tuple[list, list]:
    built = build(np.random.default_rng(0), batch=2, **kw)
    step = dualflow.compile(built["step"]) if compiled else built["step"]
    losses = [step().item() for _ in range(steps)]
    return losses, [p.numpy().copy() for p in built["params"]]


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_checkpointed_resnet18_is_bit_identical_to_the_plain_step(compiled: bool) -> None:
    plain = _run(build_resnet18_b64, compiled, width=0.125)
    checked = _run(build_resnet18_checkpoint, compiled, width=0.125)
    assert plain[0] == checked[0]
    for a, b in zip(plain[1], checked[1]):
        np.testing.assert_array_equal(a, b)


def test_autocast_mlp_compiled_equals_eager() -> None:
    eager, compiled = _run(build_mlp_autocast, False), _run(build_mlp_autocast, True)
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-6)
    for a, b in zip(compiled[1], eager[1]):
        np.testing.assert_allclose(a, b, rtol=1e-6)


@pytest.mark.filterwarnings("ignore:remat:RuntimeWarning")  # 0.5 may be out of reach
def test_remat_row_is_bit_identical_to_the_plain_step_with_a_lower_planned_peak() -> None:
    def run(build):
        built = build(np.random.default_rng(0), batch=2, width=0.125)
        step = prepare("compiled", built["step"], built.get("compile"))
        losses = [step().item() for _ in range(2)]
        return losses, [p.numpy().copy() for p in built["params"]], step.history[-1].plan

    plain, remat = run(build_resnet18_b64), run(build_resnet18_remat)
    assert plain[0] == remat[0]
    for a, b in zip(plain[1], remat[1]):
        np.testing.assert_array_equal(a, b)
    assert remat[2].predicted_peak < plain[2].predicted_peak


def test_rows_are_registered() -> None:
    assert WORKLOADS["resnet18-b64"].build is build_resnet18_b64 and BATCH == 64  # issue 42's
    assert WORKLOADS["resnet18-checkpoint"].build is build_resnet18_checkpoint
    assert WORKLOADS["resnet18-remat"].build is build_resnet18_remat
    assert WORKLOADS["mlp-autocast"].build is build_mlp_autocast


def test_goal_lines_compare_each_memory_row_with_the_plain_row_of_its_mode() -> None:
    def row(name: str, mode: str, ms: float, peak: int) -> Measurement:
        return Measurement(name, mode, ms, ms, ms, 5, peak)

    rows = [
        row("resnet18-b64", "eager", 100.0, 1000),
        row("resnet18-b64", "compiled", 50.0, 800),
        row("resnet18-checkpoint", "eager", 120.0, 700),
        row("resnet18-checkpoint", "compiled", 80.0, 400),
        row("resnet18-remat", "eager", 100.0, 1000),  # the plain eager step: no line
        row("resnet18-remat", "compiled", 67.0, 480),
    ]
    head, *lines = memory_goal_lines(rows)
    assert "40%" in head and "1.35x" in head and len(lines) == 3
    assert lines[0].endswith("peak -30% (1000 B -> 700 B), time 1.20x median, 1.20x min: not met")
    assert lines[1].endswith("peak -50% (800 B -> 400 B), time 1.60x median, 1.60x min: not met")
    assert lines[2].endswith("peak -40% (800 B -> 480 B), time 1.34x median, 1.34x min: met")
    assert memory_goal_lines(rows[2:]) == []  # no plain row: nothing to compare with
