"""Disturbed cells measured again: the decile spread, ``until_quiet`` and its use by the bench's
cells and the peers'."""

from __future__ import annotations

import sys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dualflow.bench import cli
from dualflow.bench.harness import Measurement
from dualflow.bench.idle import mark_busy, spread, until_quiet
from dualflow.bench.peers.child import deciles
from dualflow.bench.peers.runner import run_peers


def _row(median: float, low: float, high: float, mode: str = "eager") -> Measurement:
    return Measurement("w", mode, median, low, high, 5, 0)


def test_a_few_interrupted_calls_among_many_leave_a_cell_quiet() -> None:
    ticks = [1.0] * 196 + [3.0, 4.0, 5.0, 9.0]  # 2% of the calls hit by the OS
    row = Measurement.of_times("w", "eager", ticks, 0)
    assert row.ms_max == 9.0 and spread(row) == 0.0
    mark_busy([row])
    assert not row.busy and not row.noisy


def test_another_process_on_a_fifth_of_the_calls_makes_it_busy() -> None:
    shared = [1.0] * 160 + [2.0] * 40  # a core taken for a fifth of the cell
    row = Measurement.of_times("w", "eager", shared, 0)
    mark_busy([row])
    assert row.busy and spread(row) == 1.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.001, 1e3), min_size=1, max_size=80))
def test_deciles_are_numpys_percentiles(times: list[float]) -> None:
    assert np.allclose(deciles(times), np.percentile(times, [10, 90]))


def test_until_quiet_stops_at_the_first_quiet_attempt() -> None:
    attempts = iter([_row(1.0, 0.5, 3.0), _row(2.0, 1.9, 2.1), _row(0.1, 0.1, 0.1)])
    row = until_quiet(lambda: next(attempts), lambda r: r, 0.5, attempts=3)
    assert (row.ms_median, row.attempts, row.dropped_spreads) == (2.0, 2, [2.5])


def test_until_quiet_keeps_the_least_spread_not_the_fastest_when_none_is_quiet() -> None:
    attempts = iter([_row(1.0, 0.1, 3.0), _row(5.0, 2.0, 9.0), _row(2.0, 1.0, 3.2)])
    row = until_quiet(lambda: next(attempts), lambda r: r, 0.5, attempts=3)
    assert (row.ms_median, row.attempts) == (2.0, 3)
    assert row.dropped_spreads == [2.9, 1.4]
    mark_busy([row])
    assert row.busy  # still disturbed: the run does not count


def test_one_attempt_measures_once() -> None:
    calls = []
    row = until_quiet(lambda: calls.append(1) or _row(1.0, 0.1, 3.0), lambda r: r, 0.5, 1)
    assert len(calls) == 1 and row.attempts == 1 and row.dropped_spreads is None


def test_the_bench_measures_a_disturbed_cell_again_from_the_same_state(monkeypatch) -> None:
    real = cli._measure_cell
    seen: list[str] = []

    def disturbed_once(name, mode, seed, count, device):
        row, state = real(name, mode, seed, count, device)
        busy = mode == "compiled" and "compiled" not in seen  # its first attempt only
        row.ms_p10, row.ms_p90 = (
            row.ms_median * (0.1 if busy else 1),
            row.ms_median * (3 if busy else 1),
        )
        seen.append(mode)
        return row, state

    monkeypatch.setattr(cli, "_measure_cell", disturbed_once)
    rows = cli.run(["tiny-ops"], 1.0, 0, repeats=3, retry=(0.5, 3))
    by_mode = {r.mode: r for r in rows}
    assert seen.count("compiled") == 2 and seen.count("eager") == 1
    assert by_mode["compiled"].attempts == 2 and by_mode["compiled"].dropped_spreads == [2.9]
    assert by_mode["compiled"].matches  # the kept attempt's state is compared with eager's


FLAKY = """
import json, pathlib, sys
framework, workload, repeats, warmup = sys.argv[1:]
if workload == "-":
    record = {"probe": True, "version": "1"}
else:
    count = pathlib.Path(sys.argv[0]).with_suffix(".count")
    n = int(count.read_text()) if count.exists() else 0
    count.write_text(str(n + 1))
    low, high = (0.2, 9.0) if n == 0 else (1.9, 2.1)
    record = {"median_ms": 2.0, "min_ms": low, "max_ms": high, "p10_ms": low, "p90_ms": high,
              "mode": framework + " fake", "repeats": int(repeats)}
print("DUALFLOW_PEER_RESULT " + json.dumps(record))
"""


def test_a_disturbed_peer_is_measured_again(tmp_path) -> None:
    child = tmp_path / "child.py"
    child.write_text(FLAKY)
    rows, _ = run_peers(
        ["resnet18"], sys.executable, lambda n: 3, lambda n: 1, None, (0.5, 3), child
    )
    assert [(r.attempts, r.bounds(), r.dropped_spreads) for r in rows] == [(2, (1.9, 2.1), [4.4])]
