"""A busy machine's timings are flagged, not turned into a speed-up (issue 19), and the chart
draws every mode that ran, ``--passes`` modes included."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dualflow.bench import harness
from dualflow.bench.cli import chart_modes, format_table, run, write_outputs
from dualflow.bench.harness import Measurement, is_noisy
from dualflow.bench.modes import compare


def test_a_row_whose_spread_exceeds_its_median_is_flagged_in_table_and_json(
    tmp_path, monkeypatch
) -> None:
    # eager was timed while another process held the cores: one call took 20x the others
    timings = iter([np.array([2.0, 2.1, 41.0]) * 1e-3, np.array([0.1, 0.1, 0.11]) * 1e-3])
    # the warm-up calls (no repeats) come first and time nothing
    fake = lambda fn, repeats, *a, **k: next(timings) if repeats else np.empty(0)  # noqa: E731
    monkeypatch.setattr(harness, "time_calls", fake)
    eager = harness.measure("mlp", "eager", lambda: None, 3, warmup=0)
    compiled = harness.measure("mlp", "compiled", lambda: None, 3, warmup=0)
    assert eager.noisy and not compiled.noisy
    compare(compiled, eager, [np.ones(2)], [np.ones(2)])
    assert compiled.noisy and compiled.speedup is None  # not a bogus 20x
    table = format_table([eager, compiled])
    row = next(line for line in table.splitlines() if "compiled" in line)
    assert row.split()[4] == "noisy", row  # the speedup column
    assert "p10-p90 spread wider than the median" in row
    (path,) = write_outputs([eager, compiled], str(tmp_path), chart=False)
    with open(path) as file:
        results = json.load(file)["results"]
    assert [(r["noisy"], r["speedup"]) for r in results] == [(True, None), (True, None)]


def test_quiet_timings_keep_their_speedup() -> None:
    eager = Measurement("w", "eager", 2.0, 1.9, 2.4, 3, 100)
    compiled = Measurement("w", "compiled", 1.0, 0.95, 1.3, 3, 50)
    assert not is_noisy(eager.ms_median, eager.ms_min, eager.ms_max)
    compare(compiled, eager, [np.ones(1)], [np.ones(1)])
    assert compiled.speedup == 2.0 and not compiled.noisy
    assert "2.00x" in format_table([eager, compiled])


def test_chart_draws_the_passes_modes(tmp_path) -> None:
    modes = ("eager", "compiled-O0", "compiled", "compiled[dce,cse]")
    rows = run(["tiny-ops"], 1.0, 0, repeats=3, modes=modes)
    assert chart_modes(rows) == list(modes)
    pytest.importorskip("matplotlib")
    paths = write_outputs(rows, str(tmp_path), chart=True)
    assert paths[-1].endswith("bench.png") and (tmp_path / "bench.png").stat().st_size > 0
