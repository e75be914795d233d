"""``dualflow bench``: run the workloads in each mode, print one table, write JSON and a chart.

Only the eager mode exists until ``@dualflow.compile`` lands; the table, JSON and chart already
carry a mode column so compiled modes slot in beside it.
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
from dualflow.bench.workloads import WORKLOADS

MODES = ("eager",)


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
    return parser


def _progress(items: list, desc: str) -> Any:
    try:
        from tqdm import tqdm  # noqa: PLC0415 - optional (the bench/dev extras install it)
    except ImportError:
        return items
    return tqdm(items, desc=desc, file=sys.stderr, leave=False)


def run(
    names: Sequence[str], repeats_scale: float, seed: int, repeats: int | None = None
) -> list[Measurement]:
    """Measure every (workload, mode) pair; returns the table rows."""
    rows = []
    cells = [(name, mode) for name in names for mode in MODES]
    for name, mode in _progress(cells, "bench"):
        workload = WORKLOADS[name]
        built = workload.build(np.random.default_rng(seed))
        count = repeats or max(3, int(workload.quick_repeats * repeats_scale))
        rows.append(measure(name, mode, built["step"], count, built.get("baseline")))
    return rows


def format_table(rows: list[Measurement]) -> str:
    """Render the rows as a fixed-width text table.

    Example:
        >>> print(format_table([Measurement("w", "eager", 1.0, 0.9, 1.2, 10, 2048)]))
        ... # doctest: +NORMALIZE_WHITESPACE
        workload  mode   ms/step (min-max)    peak MB  baseline ms
        w         eager  1.000 (0.900-1.200)  0.00     -
    """
    header = ("workload", "mode", "ms/step (min-max)", "peak MB", "baseline ms")
    lines = [
        (
            r.workload,
            r.mode,
            f"{r.ms_median:.3f} ({r.ms_min:.3f}-{r.ms_max:.3f})",
            f"{r.peak_bytes / 2**20:.2f}",
            "-" if r.baseline_ms is None else f"{r.baseline_ms:.3f}",
        )
        for r in rows
    ]
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
        ax.bar(np.arange(len(names)) + 0.8 * k / len(MODES), values, 0.8 / len(MODES), label=mode)
    ax.set_xticks(np.arange(len(names)), names)
    ax.set_ylabel("ms / step (median)")
    ax.set_yscale("log")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dualflow bench``."""
    args = _parser().parse_args(argv)
    names = [n.strip() for n in args.workloads.split(",") if n.strip()]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        print(f"unknown workloads {unknown}; choose from {list(WORKLOADS)}", file=sys.stderr)
        return 2
    rows = run(names, 10.0 if args.full else 1.0, args.seed, args.repeats)
    print(format_table(rows))
    for path in write_outputs(rows, args.out, not args.no_chart):
        print(f"wrote {path}")
    return 0
