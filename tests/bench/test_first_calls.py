"""``dualflow bench``'s first-call timings: compile and plan-cache load in fresh processes, their
goals, and when ``--peers`` runs them (``first_calls``, ``peers.section``)."""

from __future__ import annotations

import argparse
import os
import subprocess

import numpy as np
import pytest

import dualflow
from dualflow.bench import first_calls
from dualflow.bench.harness import Measurement
from dualflow.bench.peers import section
from dualflow.bench.workloads import WORKLOADS
from dualflow.errors import ShapeError, user_code_folders


def _calls(load_s: float = 0.2, loaded: bool = True, run_s: float = 0.9) -> first_calls.FirstCalls:
    return first_calls.FirstCalls("w", 1.0, run_s, 0.1, load_s, 0.5, loaded, 1.25)


def test_compile_time_is_the_first_two_calls_beyond_two_steps() -> None:
    assert _calls().compile_s == pytest.approx(1.0 + 0.9 - 0.2)
    fast, slow = first_calls.format_lines(_calls()), first_calls.format_lines(_calls(run_s=5.0))
    assert fast[1].endswith("goal <= 2 s: yes") and slow[1].endswith("goal <= 2 s: NO")
    assert fast[2].endswith("goal <= 0.3 s: yes")
    assert first_calls.format_lines(_calls(load_s=0.5))[2].endswith("goal <= 0.3 s: NO")
    retraced = first_calls.format_lines(_calls(loaded=False))[2]
    assert "not loaded" in retraced and retraced.endswith("NO")
    assert "worker finished 1.25 s after the first plan run" in fast[3]


@pytest.mark.parametrize(
    ("peers", "spec", "names", "want"),
    [
        (True, None, ["tiny-ops", "resnet18"], ["resnet18"]),
        (True, None, ["tiny-ops"], []),  # the default only among the workloads run
        (False, None, ["resnet18"], []),
        (False, "mlp,tiny-ops", ["resnet18"], ["mlp", "tiny-ops"]),
        (True, "none", ["resnet18"], []),
    ],
)
def test_which_workloads_get_first_calls(peers, spec, names, want) -> None:
    args = argparse.Namespace(peers=peers, first_calls=spec)
    assert section.first_call_names(args, names) == want


def test_report_appends_the_first_calls_and_bench_json_keeps_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = []
    monkeypatch.setattr(first_calls, "measure", lambda name: seen.append(name) or _calls())
    args = argparse.Namespace(peers=False, idle_wait=None, max_spread=0.5, first_calls="mlp")
    rows = [Measurement("mlp", "eager", 1.0, 0.9, 1.1, 3, 0)]
    _, text, extra = section.report(args, ["mlp"], rows, lambda n: 3, lambda n: 1)
    assert seen == ["mlp"] and "first calls of w" in text and "compile 1.70 s" in text
    assert extra["first_calls"][0]["compile_s"] == pytest.approx(1.7)


def test_a_bench_workload_is_user_code_for_locations_and_the_plan_cache() -> None:
    # ops a workload issues are located at the workload's line, not at the bench's caller
    # (``<frozen runpy>`` under ``python -m``, whose plans could not be stored)
    step = WORKLOADS["tiny-ops"].build(np.random.default_rng(0), dualflow.device.CPU)["step"]
    compiled = dualflow.compile(step)
    compiled()
    lines = {n.loc for n in compiled.history[-1].graph.nodes if n.loc}
    assert lines and all("workloads.py:" in line for line in lines), lines
    bad = dualflow.tensor(np.ones((2, 3), np.float32))
    with pytest.raises(ShapeError, match=r"test_first_calls\.py:\d+"):
        bad @ bad  # an op called from here names this line, as before
    assert any(folder.endswith(f"dualflow{os.sep}bench{os.sep}") for folder in user_code_folders())


def test_a_failing_child_is_one_line_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(name: str) -> None:
        raise subprocess.CalledProcessError(1, ["python"], stderr="Traceback\nKeyError: 'nope'\n")

    monkeypatch.setattr(first_calls, "measure", broken)
    args = argparse.Namespace(peers=False, idle_wait=None, max_spread=0.5, first_calls="nope")
    _, text, extra = section.report(args, ["mlp"], [], lambda n: 3, lambda n: 1)
    assert "first calls of nope: failed (CalledProcessError: [\"KeyError: 'nope'\"])" in text
    assert "first_calls" not in extra


def test_a_pair_timed_on_shared_cores_is_measured_again(monkeypatch: pytest.MonkeyPatch) -> None:
    pairs = []
    monkeypatch.setattr(
        first_calls, "_measure_pair", lambda name, timeout: pairs.append(name) or _calls()
    )
    readings = iter([1.0, 1.96, 2.0, 1.9, 1.02, 1.01])  # before and after each pair
    calls = first_calls.measure("w", sharing=lambda: next(readings))
    assert len(pairs) == 3 and calls.attempts == 3 and calls.cores_shared == 1.02
    assert (
        "CPUs computing apart around it (probe 1.02, the pair measured 3 times)"
        in (first_calls.format_lines(calls)[0])
    )
    pairs.clear()
    calls = first_calls.measure("w", sharing=lambda: 1.97)
    assert len(pairs) == first_calls.ATTEMPTS and calls.cores_shared == 1.97
    assert "two CPUs shared a core around all 3 pairs" in first_calls.format_lines(calls)[0]
