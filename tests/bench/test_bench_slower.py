"""The bench names every row where compiling made a step slower (issue 38): a compiled mode
slower than eager, or a mode with passes slower than compiled-O0, beyond the rows' noise; and a
flag its cells' order made up (the load changed between them) is dropped when the steps, timed
in turn, do not repeat it."""

from __future__ import annotations

import json
import time

import numpy as np

from dualflow.bench import cli, harness
from dualflow.bench.cli import format_table, run, write_outputs
from dualflow.bench.harness import Measurement
from dualflow.bench.slower import confirm, flag_slower, references, slower_by, summary


def _row(mode: str, median: float, low: float, high: float) -> Measurement:
    return Measurement("lstm-lm", mode, median, low, high, 10, 0)


def test_a_compiled_row_slower_than_o0_is_flagged_in_table_json_and_summary(tmp_path) -> None:
    rows = [
        _row("eager", 97.5, 95.0, 101.0),
        _row("compiled-O0", 88.8, 87.0, 92.0),
        _row("compiled", 96.5, 94.0, 99.0),  # its fastest call slower than O0's median one
    ]
    flagged = flag_slower(rows)
    assert [(r.mode, [o.mode for o in than]) for r, than in flagged] == [
        ("compiled", ["compiled-O0"])
    ]
    assert rows[2].slower == "compiled-O0 1.09x" and rows[1].slower is None
    lines = format_table(rows).splitlines()
    line = next(x for x in lines if x.split()[:2] == ["lstm-lm", "compiled"])
    assert "SLOWER than compiled-O0 1.09x" in line
    assert summary(rows) == "SLOWER beyond noise: lstm-lm compiled (than compiled-O0 1.09x)"
    (path,) = write_outputs(rows, str(tmp_path), chart=False)
    with open(path) as file:
        assert [r["slower"] for r in json.load(file)["results"]] == [None, None, rows[2].slower]


def test_overlapping_or_close_timings_are_not_flagged() -> None:
    o0 = _row("compiled-O0", 88.8, 87.0, 92.0)
    assert slower_by(_row("compiled", 96.5, 80.0, 130.0), o0) is None  # its best beats O0's
    assert slower_by(_row("compiled", 90.0, 90.0, 90.5), o0) is None  # within the margin
    assert slower_by(_row("compiled", 90.0, 90.0, 90.5), Measurement("w", "x", 1, 1, 1, 0, 0)) is (
        None  # a row without timings (failed, skipped) compares with nothing
    )
    rows = [_row("eager", 50.0, 49.0, 51.0), _row("compiled-lazy", 60.0, 58.0, 62.0), o0]
    flag_slower(rows)  # lazy re-execution runs Python each call: compared with eager only
    assert rows[1].slower == "eager 1.20x" and references("compiled-lazy") == ("eager",)
    assert references("compiled[dce,cse]") == ("eager", "compiled-O0")
    assert rows[2].slower == "eager 1.78x"  # O0 is a compiled mode too
    assert summary([_row("compiled", 1.0, 1.0, 1.0)]).startswith("compiled no slower")


def test_a_flag_the_alternated_timings_do_not_repeat_becomes_a_note() -> None:
    eager, o0 = _row("eager", 5.0, 5.0, 5.0), _row("compiled-O0", 1.0, 1.0, 1.0)
    row = _row("compiled", 9.0, 9.0, 9.0)
    (flagged,) = flag_slower([eager, o0, row])
    assert row.slower == "eager 1.80x, compiled-O0 9.00x"
    naps = {"compiled": 0.004, "eager": 0.0, "compiled-O0": 0.012}  # now slower than eager only
    confirm([flagged], lambda name, mode: lambda: time.sleep(naps[mode]), lambda name: 3)
    assert row.slower is not None and row.slower.startswith("eager ")
    assert "compiled-O0" not in row.slower
    assert (
        row.note == "slower than compiled-O0 in its cell, not when timed alternately (load drift)"
    )


def test_the_bench_run_flags_and_confirms_its_slower_rows(monkeypatch) -> None:
    # compiled timed while the machine was busy: 3x O0's calls
    timings = {"eager": 2.0, "compiled-O0": 1.0, "compiled": 3.0, "compiled-lazy": 1.5}
    monkeypatch.setattr(harness, "time_calls", lambda fn, repeats, *a, **k: np.full(repeats, 1e-3))
    seen = []

    def measure(name, mode, *args, **kwargs):
        return Measurement(name, mode, timings[mode], timings[mode], timings[mode], 3, 0)

    monkeypatch.setattr(cli, "measure", measure)
    monkeypatch.setattr(cli, "confirm", lambda flagged, make, count: seen.extend(flagged))
    rows = run(["tiny-ops"], 1.0, 0, repeats=3)
    assert [(r.mode, [o.mode for o in than]) for r, than in seen] == [
        ("compiled", ["eager", "compiled-O0"])
    ]
    assert next(r for r in rows if r.mode == "compiled").slower == "eager 1.50x, compiled-O0 3.00x"
