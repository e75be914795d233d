"""The busy-machine checks: the idle gate's waiting, spread flags and whether a run counts."""

from __future__ import annotations

from dualflow.bench.cli import run
from dualflow.bench.harness import Measurement
from dualflow.bench.idle import mark_busy, others_cpu, verdict, wait_until_idle


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0  # every probe takes a second
        return self.now


def test_gate_waits_until_others_settle() -> None:
    samples = iter([0.9, 0.8, 0.1])
    check = wait_until_idle(30.0, limit=0.15, probe=lambda: next(samples), clock=_Clock())
    assert check.idle and check.others == 0.1 and check.waited_s == 3.0


def test_gate_gives_up_after_max_wait_and_says_not_idle() -> None:
    check = wait_until_idle(5.0, probe=lambda: 0.7, clock=_Clock())
    assert not check.idle and check.others == 0.7 and check.waited_s == 5.0


def test_others_cpu_is_a_share() -> None:
    assert 0.0 <= others_cpu(0.05) <= 1.0


def test_spread_flags_and_run_verdicts() -> None:
    calm = Measurement("w", "eager", 1.0, 0.9, 1.2, 5, 0, idle=True)
    wide = Measurement("w", "compiled", 1.0, 0.8, 1.9, 5, 0, idle=True)
    note_only = Measurement("w", "torch eager", 0.0, 0.0, 0.0, 0, 0, note="skipped: no torch")
    mark_busy([calm, wide, note_only], max_spread=0.5)
    assert (calm.busy, wide.busy, note_only.busy) == (False, True, False)
    assert abs(wide.spread - 1.1) < 1e-12 and note_only.spread is None
    counts, footer = verdict([calm, wide, note_only], 0.5, gated=True)
    assert not counts and footer.startswith("busy: spread too wide") and "w compiled" in footer
    assert footer.endswith("this run does not count")
    assert verdict([calm, note_only], 0.5, gated=True)[0] is True
    calm.idle, calm.others_cpu = False, 0.42
    counts, footer = verdict([calm], 0.5, gated=True)
    assert not counts and "not idle before 1 cells (others used up to 42%)" in footer
    assert verdict([calm], 0.5, gated=False) == (
        False,
        "spreads within 0.50 x median; no idle gate (--idle-wait): does not count",
    )


def test_run_records_the_gate_on_every_row() -> None:
    rows = run(["tiny-ops"], 1.0, 0, repeats=3, idle_wait=0.0)
    assert all(r.idle is not None and 0.0 <= r.others_cpu <= 1.0 for r in rows)
    assert all(r.idle is None for r in run(["tiny-ops"], 1.0, 0, repeats=3))
