"""``dualflow bench``: run the workloads in each mode, print one table, write JSON and a chart.

For every workload each mode starts from the same seeded state and runs the same number of steps,
so the last column can say whether the compiled results match eager ones.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from dualflow.bench.harness import Measurement, measure
from dualflow.bench.modes import MODES, compile_report, final_state, max_difference, prepare
from dualflow.bench.workloads import WORKLOADS
from dualflow.passes.manager import resolve_passes


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dualflow bench", description=__doc__)
    speed = parser.add_mutually_exclusive_group()
    speed.add_argument("--quick", action="store_true", help="few repeats (the default)")
    speed.add_argument("--full", action="store_true", help="10x more repeats")
    parser.add_argument(
        "--workloads",
        default=",".join(WORKLOADS),
        help=f"comma-separated subset of: {', '.join(WORKLOADS)}",
    )
    parser.add_argument("--out", default="bench-out", help="directory for bench.json/bench.png")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per cell")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-chart", action="store_true", help="skip the PNG chart")
    parser.add_argument("--compare-to", default=None, help="an earlier bench.json to compare to")
    parser.add_argument("--passes", default=None, help="also run mode compiled[a,b] (pass list)")
    return parser


def _progress(items: list, desc: str) -> Any:
    try:
        from tqdm import tqdm  # noqa: PLC0415 - optional (the bench/dev extras install it)
    except ImportError:
        return items
    return tqdm(items, desc=desc, file=sys.stderr, leave=False)


def _keeping_last(step: Any, last: list[Any]) -> Any:
    def call() -> None:
        last[0] = step()

    return call


def run(
    names: Sequence[str],
    repeats_scale: float,
    seed: int,
    repeats: int | None = None,
    modes: Sequence[str] = MODES,
) -> list[Measurement]:
    """Measure every (workload, mode) pair; returns the table rows (in ``names`` order)."""
    rows = []
    own = [name for name in names if WORKLOADS[name].rows is not None]
    cells = [(name, mode) for name in names if name not in own for mode in modes]
    reference: dict[str, tuple[Measurement, list]] = {}
    for name, mode in _progress(cells, "bench"):
        workload = WORKLOADS[name]
        built = workload.build(np.random.default_rng(seed))
        count = repeats or max(3, int(workload.quick_repeats * repeats_scale))
        step = prepare(mode, built["step"])
        last: list[Any] = [None]
        row = measure(name, mode, _keeping_last(step, last), count, built.get("baseline"))
        state = final_state(built, last[0])
        row.compile_ms, row.steps = compile_report(step)
        if mode == "eager":
            reference[name] = (row, state)
        elif name in reference:
            eager, eager_state = reference[name]
            row.max_diff = max_difference(eager_state, state)
            row.speedup = eager.ms_median / row.ms_median
            row.mem_ratio = row.peak_bytes / max(eager.peak_bytes, 1)
        rows.append(row)
    for name in own:  # a workload that reports its own rows, e.g. from MPI ranks
        workload = WORKLOADS[name]
        rows += workload.rows(repeats or max(3, int(workload.quick_repeats * repeats_scale)), seed)
    order = {name: i for i, name in enumerate(names)}
    return sorted(rows, key=lambda r: order[r.workload])  # stable: modes keep their order


def _cells(r: Measurement) -> tuple[str, ...]:
    def opt(value: float | None, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    if not r.repeats:  # a note-only row (skipped or failed workload)
        return (r.workload, r.mode, *("-" * 8))
    return (
        r.workload,
        r.mode,
        f"{r.ms_median:.3f} ({r.ms_min:.3f}-{r.ms_max:.3f})",
        opt(r.speedup, ".2f") + ("x" if r.speedup is not None else ""),
        f"{r.peak_bytes / 2**20:.2f}",
        opt(r.mem_ratio, ".2f"),
        opt(r.compile_ms, ".1f"),
        opt(r.steps, "d"),
        opt(r.baseline_ms, ".3f"),
        "-" if r.max_diff is None else f"{'yes' if r.max_diff < 1e-4 else 'NO'} ({r.max_diff:.1e})",
    )


def format_table(rows: list[Measurement]) -> str:
    """Render the rows as a fixed-width text table (a ``note`` column when a row has one).

    Example:
        >>> print(format_table([Measurement("w", "eager", 1.0, 0.9, 1.2, 10, 2048)]))
        ... # doctest: +NORMALIZE_WHITESPACE
        workload  mode   ms/step (min-max)    speedup  peak MB  mem ratio  compile ms  steps
          baseline ms  matches eager
        w         eager  1.000 (0.900-1.200)  -        0.00     -          -           -
          -            -
    """
    header = (
        "workload",
        "mode",
        "ms/step (min-max)",
        "speedup",
        "peak MB",
        "mem ratio",
        "compile ms",
        "steps",
        "baseline ms",
        "matches eager",
    )
    lines = [_cells(r) for r in rows]
    if any(r.note for r in rows):
        header += ("note",)
        lines = [(*line, r.note or "") for line, r in zip(lines, rows)]
    widths = [max(len(str(c)) for c in col) for col in zip(header, *lines)]
    return "\n".join(
        "  ".join(str(c).ljust(w) for c, w in zip(line, widths)).rstrip()
        for line in [header, *lines]
    )


def write_outputs(rows: list[Measurement], out: str, chart: bool) -> list[str]:
    """Write ``bench.json`` (and ``bench.png`` when matplotlib is present); returns paths."""
    os.makedirs(out, exist_ok=True)
    meta = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }
    path = os.path.join(out, "bench.json")
    with open(path, "w") as f:
        json.dump({"meta": meta, "results": [r.as_dict() for r in rows]}, f, indent=2)
    written = [path]
    if chart:
        png = _chart(rows, os.path.join(out, "bench.png"))
        if png:
            written.append(png)
    return written


def _chart(rows: list[Measurement], path: str) -> str | None:
    try:
        import matplotlib  # noqa: PLC0415 - optional (the bench/dev extras install it)

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return None
    names = list(dict.fromkeys(r.workload for r in rows))
    fig, ax = plt.subplots(figsize=(1.6 * len(names) + 2, 3.5))
    for k, mode in enumerate(MODES):
        values = [
            next((r.ms_median for r in rows if r.workload == n and r.mode == mode), 0)
            for n in names
        ]
        width = 0.8 / len(MODES)
        offset = (k - (len(MODES) - 1) / 2) * width  # groups centred on their tick
        ax.bar(np.arange(len(names)) + offset, values, width, label=mode)
    ax.set_xticks(np.arange(len(names)), names)
    ax.set_ylabel("ms / step (median)")
    ax.set_yscale("log")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def compare_to(rows: list[Measurement], path: str) -> str:
    """Lines giving each (workload, mode)'s ms_median as a ratio to an earlier ``bench.json``.

    Example:
        >>> compare_to([], os.devnull + "-missing")
        'compare-to: cannot read /dev/null-missing'
    """
    try:
        with open(path) as f:
            old = {(r["workload"], r["mode"]): r for r in json.load(f)["results"]}
    except (OSError, ValueError, KeyError):
        return f"compare-to: cannot read {path}"
    lines = [f"ratio to {path} (ms/step now / then):"]
    for r in rows:
        before = old.get((r.workload, r.mode), {}).get("ms_median")
        ratio = f"{r.ms_median / before:.2f}x" if before and r.repeats else "-"
        lines.append(f"  {r.workload:<16} {r.mode:<24} {ratio}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dualflow bench``."""
    args = _parser().parse_args(argv)
    names = [n.strip() for n in args.workloads.split(",") if n.strip()]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        print(f"unknown workloads {unknown}; choose from {list(WORKLOADS)}", file=sys.stderr)
        return 2
    modes = MODES
    if args.passes is not None:
        try:
            extra = f"compiled[{','.join(resolve_passes(args.passes))}]"
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 2
        modes = (*MODES, extra)
    rows = run(names, 10.0 if args.full else 1.0, args.seed, args.repeats, modes)
    print(format_table(rows))
    if args.compare_to:
        print(compare_to(rows, args.compare_to))
    for path in write_outputs(rows, args.out, not args.no_chart):
        print(f"wrote {path}")
    return 0
