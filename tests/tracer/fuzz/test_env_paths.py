"""Issue 35's fuzzer: a compiled step reading a Python number of its environment through an access
path (a root, then steps: ``env_roots``, ``env_steps``) that changes between calls must give
eager's results and state, or warn; never silently differ.

``test_each_construct`` runs every construct of the grammar on its own (those in
``env_known.KNOWN_SILENT`` are expected to fail today, strictly); the random programs compose them
(a fast profile by default, 5,000 programs with ``pytest -m slow``) and leave out the constructs
of ``KNOWN_SILENT`` until that set is empty.
"""

from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pytest

from tests.tracer.fuzz import env_helpers as lib
from tests.tracer.fuzz.env_compare import Verdict, classify, verdict
from tests.tracer.fuzz.env_draw import cases, draw, minimal
from tests.tracer.fuzz.env_known import KNOWN_SILENT, avoided
from tests.tracer.fuzz.env_program import Call, EnvProgram, Mutation, Played, inputs, play

FAST_PROGRAMS = 100
SLOW_CHUNKS, SLOW_CHUNK = 10, 500  # 5,000 programs, seeds 100_000 on, one test per chunk
_XFAIL = pytest.mark.xfail(strict=True, reason="issue 35: silent mismatch today")


def _case(case: str) -> object:
    return pytest.param(case, marks=_XFAIL) if case in KNOWN_SILENT else case


def _explain(program: EnvProgram, found: Verdict) -> str:
    return f"{found.outcome}: {found.detail}\n{program!r}\n{program.source()}"


@pytest.mark.parametrize("case", [_case(c) for c in cases()])
def test_each_construct(case: str) -> None:
    program = minimal(case)
    found = verdict(program)
    assert found.outcome == "equal", _explain(program, found)


@pytest.mark.parametrize("case", cases())
def test_each_construct_by_lazy_re_execution(case: str) -> None:
    # issue 35: the path that depends on no model of Python is right by construction
    program = minimal(case)
    found = verdict(program, lazy="always")
    assert found.outcome == "equal", _explain(program, found)


@pytest.mark.parametrize(
    "case", [c for c in cases() if c.startswith(("root:", "step:")) and not c.endswith("/none")]
)
def test_each_construct_really_reads_the_changed_value(case: str) -> None:
    # eagerly, call 2 sees 3.0 and call 4 sees 2.0: a minimal program whose mutation missed the
    # value read would pass test_each_construct without testing anything
    program = minimal(case)
    calls, xs = play(program, compiled=False).calls, inputs(program)
    for call, value in ((1, 1.0), (2, 3.0), (4, 2.0)):
        want = (xs[call] * np.float32(value) + np.float32(1.0)).astype("float32")
        np.testing.assert_allclose(calls[call].outcome[1], want, rtol=1e-6)


def test_known_silent_names_only_real_cases() -> None:
    assert set(cases()) >= KNOWN_SILENT


def _random(seeds: range, lazy: bool | str = True) -> None:
    avoid = avoided()  # issue 35: constructs silently wrong today are left out, see env_known
    outcomes: Counter = Counter()
    plans = 0
    for seed in seeds:
        program = draw(seed, avoid)
        assert not program.constructs() & avoid
        found = verdict(program, lazy)
        assert found.outcome == "equal", _explain(program, found)
        outcomes[found.outcome] += 1
        plans += found.plans > 0
    # many programs ran a plan on some call: not every call retraced or fell back. With every
    # construct drawn, those the probe cannot name give the trace up by design (issue 35), so
    # about 40% of programs run a plan (43 of the fast profile's 100)
    assert plans >= len(seeds) // 3, (plans, len(seeds))


def test_random_programs_fast() -> None:
    _random(range(FAST_PROGRAMS))


def test_random_programs_by_lazy_re_execution_fast() -> None:
    _random(range(FAST_PROGRAMS), lazy="always")


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(SLOW_CHUNKS))
def test_random_programs_by_lazy_re_execution_slow(chunk: int) -> None:
    start = 200_000 + chunk * SLOW_CHUNK
    _random(range(start, start + SLOW_CHUNK), lazy="always")


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(SLOW_CHUNKS))
def test_random_programs_slow(chunk: int) -> None:
    start = 100_000 + chunk * SLOW_CHUNK
    _random(range(start, start + SLOW_CHUNK))


def test_draw_covers_every_construct_and_leaves_out_the_avoided() -> None:
    drawn = set().union(*(draw(seed).constructs() for seed in range(3000)))
    named = {case.split("/")[0] for case in cases()}
    assert named <= drawn, named - drawn
    avoid = avoided()
    assert not set().union(*(draw(seed, avoid).constructs() for seed in range(500))) & avoid


def test_draw_is_deterministic_and_mutates_between_calls() -> None:
    for seed in range(200):
        program = draw(seed)
        assert program == draw(seed)
        assert program.mutations and all(0 < m.call < program.calls for m in program.mutations)


def test_programs_leave_no_names_behind() -> None:
    for case in ("root:environ/rebind", "root:other_module/rebind"):
        program = minimal(case)
        play(program, compiled=True)
        assert not any(k.startswith("DUALFLOW_FUZZENV_") for k in os.environ)
        assert not any(name.startswith("CFG_") for name in vars(lib))


def _played(results: list[float], warned: list[str], raised: bool = False) -> Played:
    calls = [Call(("ok", np.full((2,), r)), {"W": np.zeros(1)}) for r in results]
    if raised:
        error = KeyError("inside dualflow")
        calls[-1] = Call(("raised", "KeyError", str(error), error), {"W": np.zeros(1)})

    class Stats:
        plan_runs, lazy_plan_segments = 1, 0

    return Played(calls, warned, type("Fn", (), {"stats": lambda self: Stats()})())


@pytest.mark.parametrize(
    ("got", "warned", "raised", "outcome"),
    [
        ([1.0, 2.0], [], False, "equal"),
        ([1.0, 1.0], [], False, "silent"),
        ([1.0, 1.0], ["f runs eagerly from now on"], False, "warned"),
        ([1.0, 2.0], [], True, "error"),
    ],
)
def test_classify(got: list[float], warned: list[str], raised: bool, outcome: str) -> None:
    assert classify(_played([1.0, 2.0], []), _played(got, warned, raised)).outcome == outcome


def test_a_state_difference_is_a_mismatch() -> None:
    eager, compiled = _played([1.0], []), _played([1.0], [])
    compiled.calls[0].state["W"] = np.ones(1)
    assert classify(eager, compiled).outcome == "silent"


def test_none_at_the_root_raises_the_same_error_eagerly_and_compiled() -> None:
    program = minimal("root:dict_global/none")
    eager, compiled = play(program, compiled=False), play(program, compiled=True)
    assert [c.outcome[0] for c in eager.calls] == ["ok", "ok", "raised", "raised", "ok"]
    assert classify(eager, compiled).outcome == "equal"


def test_a_program_whose_eager_run_raises_is_broken() -> None:
    program = EnvProgram("global", ("item",), "reshape", 1.0, (Mutation(1, 0, 5.0),), calls=2)
    assert verdict(program).outcome == "broken"  # reshape(5, -1) of 12 elements raises
