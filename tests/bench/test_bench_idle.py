"""The busy-machine checks: the idle gate's waiting, spread flags and whether a run counts."""

from __future__ import annotations

import os

from dualflow.bench.cli import run
from dualflow.bench.cpu_share import others_during, own_process
from dualflow.bench.harness import Measurement, measure
from dualflow.bench.idle import (
    OTHERS_LIMIT,
    mark_busy,
    others_cpu,
    until_quiet,
    verdict,
    wait_until_idle,
)


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


def _jax_row(spread_ms: tuple[float, float], **fields: object) -> Measurement:
    row = Measurement("tiny-ops", "jax jit", 0.1, 0.03, 0.2, 200, 0, **fields)
    row.ms_p10, row.ms_p90 = spread_ms
    return row


def test_a_peers_own_variation_on_an_idle_machine_does_not_stop_a_run() -> None:
    ours = Measurement("tiny-ops", "compiled", 0.03, 0.029, 0.031, 200, 0, idle=True)
    alone = _jax_row((0.04, 0.16), peer=True, idle=True, dropped_spreads=[1.3, 0.9])
    alone.others_during = 0.03
    mark_busy([ours, alone], 0.5)
    assert alone.varies and not alone.busy
    counts, footer = verdict([ours, alone], 0.5, gated=True)
    assert counts and "tiny-ops jax jit (varying on an idle machine" in footer


def test_wide_rows_stay_busy_unless_every_condition_of_varying_alone_holds() -> None:
    base = {"peer": True, "idle": True, "dropped_spreads": [1.3, 0.9], "others_during": 0.03}
    cases = {
        "ours": {**base, "peer": False},  # dualflow's own rows are never excused
        "others took the CPUs": {**base, "others_during": 0.4},
        "not measured during": {**base, "others_during": None},
        "never measured again": {**base, "dropped_spreads": None},
        "an attempt was quiet": {**base, "dropped_spreads": [1.3, 0.2]},
    }
    for why, fields in cases.items():
        row = _jax_row((0.04, 0.16), **fields)
        mark_busy([row], 0.5)
        assert row.busy and not row.varies, why
        assert not verdict([row], 0.5, gated=True)[0], why


def test_a_crowded_attempt_is_measured_again_however_narrow() -> None:
    shares = iter([0.4, 0.3, 0.05])

    def attempt() -> Measurement:
        row = Measurement("mlp", "compiled", 4.0, 3.9, 4.1, 30, 0, idle=True)
        row.ms_p10, row.ms_p90 = 3.95, 4.05  # narrow: only the share says it was disturbed
        row.others_during = next(shares)
        return row

    row = until_quiet(attempt, lambda r: r, 0.5, attempts=3)
    assert row.attempts == 3 and row.others_during == 0.05 and row.dropped_spreads == [0.025] * 2
    mark_busy([row], 0.5)
    assert not row.busy and verdict([row], 0.5, gated=True)[0]
    row.others_during = OTHERS_LIMIT  # the last attempt crowded too: busy, the run does not count
    mark_busy([row], 0.5)
    assert (
        row.busy
        and "others took 15% of the CPUs or two CPUs shared a core while timed"
        in verdict([row], 0.5, True)[1]
    )


def test_others_during_subtracts_what_the_measured_code_owns() -> None:
    tick = os.sysconf("SC_CLK_TCK")
    machine = iter([(1000, 5000), (1000 + 150, 5000 + 400)])  # 150 of 400 jiffies busy
    own = iter([2.0, 2.0 + 100 / tick])  # the measured code's CPU seconds: 100 jiffies
    result, share = others_during(lambda: "ran", lambda: next(own), lambda: next(machine))
    assert result == "ran" and abs(share - 50 / 400) < 1e-9
    short = iter([(0, 0), (5, 10)])
    assert others_during(lambda: 1, own_process, lambda: next(short)) == (1, None)
    assert others_during(lambda: 2, own_process, lambda: None) == (2, None)  # off Linux


def test_a_cells_timed_calls_record_others_share() -> None:
    row = measure("busy-loop", "eager", lambda: sum(range(20000)), 400, warmup=1)
    assert row.others_during is None or 0.0 <= row.others_during <= 1.0
