"""Run an issue-35 program eagerly and compiled and classify the compiled run.

Outcomes: ``equal`` (every call's result and state bit for bit eager's, whatever way the compiled
function got there: plan, guard, retrace, eager fallback), ``silent`` (a mismatch and no warning:
the failure the fuzzer hunts), ``warned`` (a mismatch with a warning of dualflow's, not numpy's
floating-point ones: a bug too, less severe), ``error`` (a compiled call raised what the eager
call did not: a crash of dualflow's), and ``broken`` (the eager run itself raised: a fault of the
generated program, unless the root held ``None`` then).
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass

from tests.tracer.fuzz.bits import first_difference
from tests.tracer.fuzz.env_program import Call, EnvProgram, Played, play

OUTCOMES = ("equal", "silent", "warned", "error", "broken")


@dataclass
class Verdict:
    """A program's outcome, the first difference (or the crash's traceback), the warnings and
    the compiled function's stats (``plans``: how many calls ran a plan)."""

    outcome: str
    detail: str
    warned: list[str]
    plans: int


def _differs(want: Call, got: Call) -> str:
    """How one compiled call differs from eager's, bit for bit ('' when it does not)."""
    if want.outcome[0] != got.outcome[0]:
        return f"outcome {got.outcome[:3]} vs eager {want.outcome[:3]}"
    if want.outcome[0] == "raised":
        same = want.outcome[1:3] == got.outcome[1:3]
        return "" if same else f"raised {got.outcome[1:3]} vs eager {want.outcome[1:3]}"
    why = first_difference(got.outcome[1], want.outcome[1])
    if why:
        return f"result {why}"
    for key, value in want.state.items():
        why = first_difference(got.state[key], value)
        if why:
            return f"state {key}: {why}"
    return ""


def _crash(got: Call) -> str:
    exc = got.outcome[3]
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def verdict(program: EnvProgram, lazy: bool | str = True) -> Verdict:
    """Play ``program`` eagerly and compiled and classify the compiled run (``OUTCOMES``).

    Example:
        >>> from tests.tracer.fuzz.env_program import Mutation
        >>> p = EnvProgram("global", ("attr",), "scale", 1.0, (Mutation(2, -1, 3.0),))
        >>> verdict(p).outcome
        'equal'
    """
    eager = play(program, compiled=False)
    nones = program.none_calls()  # raising there is the program's point
    raised = [c for i, c in enumerate(eager.calls) if c.outcome[0] == "raised" and i not in nones]
    if raised:
        return Verdict("broken", f"eager raised {raised[0].outcome[1:3]}", [], 0)
    compiled = play(program, compiled=True, lazy=lazy)
    return classify(eager, compiled)


def classify(eager: Played, compiled: Played) -> Verdict:
    """The outcome of ``compiled`` against ``eager`` (see the module docstring)."""
    stats = compiled.fn.stats()
    plans = stats.plan_runs + stats.lazy_plan_segments  # fast-path plans or lazy ones
    for call, (want, got) in enumerate(zip(eager.calls, compiled.calls)):
        why = _differs(want, got)
        if not why:
            continue
        if got.outcome[0] == "raised":
            return Verdict("error", f"call {call}: {_crash(got)}", compiled.warned, plans)
        kind = "warned" if compiled.warned else "silent"
        return Verdict(kind, f"call {call}: {why}", compiled.warned, plans)
    return Verdict("equal", "", compiled.warned, plans)
