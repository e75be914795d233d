"""The variable-shape workloads (issue 39): their fixed size sequences, one call per size, rows
compared with eager (bit for bit with ``passes="exact"``) and with static-shape plans, the CLI."""

from __future__ import annotations

import json
from functools import partial

import numpy as np
import pytest

from dualflow.bench.cli import main
from dualflow.bench.peers import shape_sizes
from dualflow.bench.peers.runner import PEERS
from dualflow.bench.shape_rows import SHAPE_MODES, shape_rows
from dualflow.bench.shape_workloads import (
    build_variable_batch,
    build_variable_batch_infer,
    build_variable_seq,
)
from dualflow.bench.workloads import WORKLOADS, default_workloads

NAMES = ("variable-batch", "variable-seq", "variable-batch-infer")
SMALL = {  # narrow models and a few sizes, repeated so that a static plan serves a repeat
    "variable-batch": partial(build_variable_batch, sizes=[3, 5, 3, 8], hidden=8),
    "variable-seq": partial(build_variable_seq, lengths=[5, 9, 5, 7], vocab=11, width=8),
    "variable-batch-infer": partial(build_variable_batch_infer, sizes=[1, 4, 1, 2], width=2),
}


def test_size_sequences_are_fixed_and_span_the_issue_ranges() -> None:
    sequences = {
        "batch": (shape_sizes.BATCH_SIZES, 1, 128),
        "seq": (shape_sizes.SEQ_LENGTHS, 5, 60),
        "infer": (shape_sizes.INFER_BATCHES, 1, 16),
    }
    for sizes, low, high in sequences.values():
        assert len(sizes) == shape_sizes.CALLS == 40
        assert low <= min(sizes) and max(sizes) <= high
        assert len(set(sizes)) >= 16  # many distinct sizes: one trace each without symbols
    assert shape_sizes.BATCH_SIZES[:4] == [54, 67, 99, 7]  # fixed: the peers draw the same
    assert set(shape_sizes.INFER_BATCHES) == set(range(1, 17))


def test_builders_give_one_call_per_size_in_order() -> None:
    built = build_variable_batch(np.random.default_rng(0))
    assert [x.shape for x, _ in built["calls"]] == [(b, 784) for b in shape_sizes.BATCH_SIZES]
    assert [tuple(p.shape) for p in built["params"]] == [(256, 784), (256,), (10, 256), (10,)]
    built = build_variable_seq(np.random.default_rng(0), width=8)
    assert [x.shape for x, _ in built["calls"]] == [(4, n) for n in shape_sizes.SEQ_LENGTHS]
    built = build_variable_batch_infer(np.random.default_rng(0), width=2)
    assert [x.shape[0] for (x,) in built["calls"]] == shape_sizes.INFER_BATCHES
    out = built["fn"](*built["calls"][0])
    assert out.shape == (shape_sizes.INFER_BATCHES[0], 10) and not out.requires_grad


def test_registered_with_torch_peers_and_in_the_default_set() -> None:
    for name in NAMES:
        workload = WORKLOADS[name]
        assert workload.build is None and workload.rows is not None and workload.on_device
        assert PEERS[name] == ("torch",) and name in default_workloads()


@pytest.mark.parametrize("name", NAMES)
def test_rows_match_eager_and_compare_with_static_plans(name: str) -> None:
    rows = shape_rows(name, SMALL[name], 1, 0)
    assert [r.mode for r in rows] == list(SHAPE_MODES)
    eager, compiled, exact, static = rows
    assert all(r.repeats == 1 and r.ms_median > 0 and r.peak_bytes > 0 for r in rows)
    assert eager.traces is None and eager.static_ratio is None and eager.max_diff is None
    assert compiled.matches is True and compiled.max_rel_diff <= 1e-5
    assert exact.matches is True and exact.max_diff == 0.0  # bit for bit
    assert compiled.static_ratio > 0 and exact.static_ratio > 0
    # static-shape plans: a trace per distinct size (4 with Adam: its first trace is single-use
    # and made again), every other call a plan run: two untimed passes, one timed, the probe
    assert static.traces in (3, 4) and static.traces + static.plan_runs == 3 * 4 + 1
    assert static.max_diff is None and static.matches is None


def test_a_failing_mode_is_a_note_row(monkeypatch) -> None:
    def broken(rng, device):
        raise RuntimeError("no kernel\nmore")

    rows = shape_rows("w", broken, 1, 0)
    assert [r.note for r in rows] == ["failed: RuntimeError: no kernel"] * 4


@pytest.mark.parametrize("name", NAMES)
def test_compiled_rows_trace_at_most_twice_and_run_plans(name: str) -> None:
    # two traces (the first, and one at other sizes that witnesses it), one more for a size 1
    # (never a symbol, as in PyTorch) and one for Adam's single-use first step
    extra = {"variable-batch": 0, "variable-seq": 1, "variable-batch-infer": 1}[name]
    sizes = {"variable-batch": [3, 5, 8, 13, 21, 34], "variable-batch-infer": [1, 2, 3, 5, 8, 9]}
    build = {
        "variable-batch": partial(build_variable_batch, sizes=sizes["variable-batch"], hidden=8),
        "variable-seq": partial(
            build_variable_seq, lengths=[5, 6, 9, 12, 20, 31], vocab=11, width=8
        ),
        "variable-batch-infer": partial(
            build_variable_batch_infer, sizes=sizes["variable-batch-infer"], width=2
        ),
    }[name]
    _, compiled, exact, _ = shape_rows(name, build, 1, 0)
    calls = 2 * 6 + 1  # a warm pass, a timed pass, the memory probe
    for row in (compiled, exact):
        assert row.traces <= 2 + extra and row.plan_runs >= calls - 2 - extra, row
        assert row.matches is True


def test_cli_row_reports_traces_plan_runs_and_static_ratio(tmp_path, capsys) -> None:
    args = ["--workloads", "variable-batch", "--repeats", "1", "--no-chart"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "bench.json").read_text())["results"]
    assert [(r["workload"], r["mode"]) for r in rows] == [
        ("variable-batch", m) for m in SHAPE_MODES
    ]
    eager, compiled, exact, static = rows
    assert compiled["traces"] >= 1 and compiled["matches"] is True
    assert exact["matches"] is True and exact["max_diff"] == 0.0
    assert static["traces"] == len(set(shape_sizes.BATCH_SIZES))
    assert compiled["static_ratio"] > 0 and eager["traces"] is None
    header = capsys.readouterr().out.splitlines()[0]
    assert "traces/plan runs" in header and "vs static" in header


def test_a_flagged_own_rows_workload_is_not_re_timed(tmp_path, monkeypatch) -> None:
    # variable-shape rows have no step the slower-row check could build again (issue 38's
    # re-timing): a flag on them stands as measured instead of failing the bench
    import dualflow.bench.cli as cli

    real = cli.flag_slower

    def flag_everything(rows):
        real(rows)
        return [(row, [row]) for row in rows]

    monkeypatch.setattr(cli, "flag_slower", flag_everything)
    args = ["--workloads", "variable-batch", "--repeats", "1", "--no-chart"]
    assert main([*args, "--out", str(tmp_path)]) == 0
