"""``dualflow bench``: run the workloads in each mode, print one table, write JSON and a chart.

For every workload each mode starts from the same seeded state and runs the same number of steps,
so the last column can say whether the compiled results match eager ones.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from dualflow.bench.devices import describe, resolve_device
from dualflow.bench.harness import Measurement, measure, time_calls
from dualflow.bench.idle import MAX_SPREAD, until_quiet, wait_until_idle
from dualflow.bench.memory_workloads import memory_goal_lines
from dualflow.bench.modes import (
    MODES,
    compare,
    compile_report,
    count_eager_ops,
    final_state,
    fresh_held,
    held_bytes,
    prepare,
)
from dualflow.bench.peers import section
from dualflow.bench.peers.goals import ISSUE_WORKLOADS
from dualflow.bench.slower import confirm, flag_slower, summary
from dualflow.bench.table import add_rates, format_table, share_flops
from dualflow.bench.workloads import ALIASES, GPU_SCALE, WORKLOADS, default_workloads, resolve_names
from dualflow.device import CPU, Device
from dualflow.errors import DeviceError
from dualflow.kernels.base import blas_core
from dualflow.kernels.base.machine_constants import machine_constants
from dualflow.kernels.fast_math.work_weights import work_weights
from dualflow.kernels.pool.pool_kernels import pool_work
from dualflow.passes.manager import resolve_passes
from dualflow.runtime.machine_rates import machine_rates
from dualflow.tracer.explain_profile import gemm_alone_share, plan_flops


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dualflow bench", description=__doc__)
    speed = parser.add_mutually_exclusive_group()
    speed.add_argument("--quick", action="store_true", help="few repeats (the default)")
    speed.add_argument("--full", action="store_true", help="10x more repeats")
    gpu_scale = [n for n, w in WORKLOADS.items() if GPU_SCALE in w.tags]
    aliases = ", ".join(f"{a} = {n}" for a, n in ALIASES.items())
    parser.add_argument(
        "--workloads",
        default=None,
        help=f"comma-separated subset of: {', '.join(WORKLOADS)} (aliases: {aliases}); "
        f"default: all, except {', '.join(gpu_scale)} unless --device is a GPU",
    )
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda:N (needs cupy)")
    parser.add_argument("--out", default="bench-out", help="directory for bench.json/bench.png")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per cell")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-chart", action="store_true", help="skip the PNG chart")
    parser.add_argument("--compare-to", default=None, help="an earlier bench.json to compare to")
    parser.add_argument("--passes", default=None, help="also run mode compiled[a,b] (pass list)")
    section.add_arguments(parser)
    return parser


def _progress(items: list, desc: str) -> Any:
    try:
        from tqdm import tqdm  # noqa: PLC0415 - optional (the bench/dev extras install it)
    except ImportError:
        return items
    return tqdm(items, desc=desc, file=sys.stderr, leave=False)


class _Recorder:
    # The callable the harness times: keeps the step's last output (compared across modes)
    # and, in eager mode, counts the ops of the first (untimed warm-up) call.
    def __init__(self, step: Any, count_ops: bool) -> None:
        self.step, self.count_ops = step, count_ops
        self.last: Any = None
        self.ops: int | None = None

    def __call__(self) -> None:
        if self.count_ops:
            self.count_ops = False
            self.last, self.ops = count_eager_ops(self.step)
        else:
            self.last = self.step()


def _measure_cell(
    name: str, mode: str, seed: int, count: int, device: Device
) -> tuple[Measurement, list]:
    workload = WORKLOADS[name]
    built = workload.build(np.random.default_rng(seed), device)
    step = prepare(mode, built["step"], built.get("compile"))
    recorder = _Recorder(step, count_ops=mode == "eager")
    baseline = built.get("baseline")
    row = measure(name, mode, recorder, count, baseline, workload.warmup, device)
    row.compile_ms, row.steps = compile_report(step)
    row.peak_bytes += held_bytes(step)  # buffers allocated at the first call count too
    row.held_bytes = fresh_held(workload, mode, seed, device)  # measured (issue 36)
    if mode == "eager":
        row.steps = recorder.ops
    flops = built.get("flops") or plan_flops(step)  # its matmuls' and convolutions'
    add_rates(row, flops, built.get("bytes"), machine_rates())
    state = final_state(built, recorder.last)  # before the profiled calls below step again
    if device.kind == "cpu" and plan_flops(step):
        row.gemm_alone = gemm_alone_share(step, step)
    return row, state


def _gated_cell(
    name: str, mode: str, seed: int, count: int, device: Device, idle_wait: float | None
) -> tuple[Measurement, list]:
    # one attempt at a cell: the idle gate (when on), then the measurement, which records it
    check = None if idle_wait is None else wait_until_idle(idle_wait)
    row, state = _measure_cell(name, mode, seed, count, device)
    if check is not None:
        row.idle, row.others_cpu = check.idle, check.others
    return row, state


def _own_rows(name: str, count: int, seed: int, device: Device) -> list[Measurement]:
    # A workload that reports its own rows runs on the CPU only (MPI ranks), unless it measures
    # on the bench's device (the variable-shape workloads).
    if WORKLOADS[name].on_device:
        return WORKLOADS[name].rows(count, seed, device)
    if device.kind != "cpu":
        note = f"skipped on {device}: runs MPI ranks on the CPU (use --device cpu)"
        return [Measurement(name, "-", 0.0, 0.0, 0.0, 0, 0, note=note)]
    return WORKLOADS[name].rows(count, seed)


def _warm_step(name: str, mode: str, seed: int, device: Device) -> Any:
    # a fresh step of the cell, past its warm-up calls (traced, kernels compiled)
    built = WORKLOADS[name].build(np.random.default_rng(seed), device)
    step = prepare(mode, built["step"], built.get("compile"))
    time_calls(step, 0, WORKLOADS[name].warmup)
    return step


def repeats_of(name: str, repeats_scale: float, repeats: int | None) -> int:
    """Timed calls of a workload's cell: ``--repeats``, else its quick count times the scale.

    Example:
        >>> repeats_of("mlp", 1.0, None), repeats_of("mlp", 10.0, None), repeats_of("mlp", 1.0, 2)
        (30, 300, 2)
    """
    return repeats or max(3, int(WORKLOADS[name].quick_repeats * repeats_scale))


def run(
    names: Sequence[str],
    repeats_scale: float,
    seed: int,
    repeats: int | None = None,
    modes: Sequence[str] = MODES,
    device: Device = CPU,
    idle_wait: float | None = None,
    retry: tuple[float, int] = (MAX_SPREAD, 1),
) -> list[Measurement]:
    """Measure every (workload, mode) pair; returns the table rows (in ``names`` order).

    With ``idle_wait`` each cell first waits up to that many seconds for an idle machine
    (``dualflow.bench.idle``) and its row records what the gate saw. ``retry`` is
    ``(max_spread, attempts)``: a cell whose timings spread wider is measured again, up to
    ``attempts`` times in all (``idle.until_quiet``).

    Example:
        >>> [r.mode for r in run(["tiny-ops"], 1.0, 0, repeats=3)]
        ['eager', 'compiled-O0', 'compiled', 'compiled-lazy']
    """

    def count(name: str) -> int:
        return repeats_of(name, repeats_scale, repeats)

    machine_rates()  # measured first, before the cells' compile workers and threads
    machine_constants()  # likewise (read from the kernels cache after a machine's first run)
    work_weights(), pool_work()  # the kernels' costs, in the constants' copies
    rows = []
    own = [name for name in names if WORKLOADS[name].rows is not None]
    cells = [(name, mode) for name in names if name not in own for mode in modes]
    reference: dict[str, tuple[Measurement, list]] = {}
    for name, mode in _progress(cells, "bench"):
        try:
            cell = functools.partial(_gated_cell, name, mode, seed, count(name), device, idle_wait)
            row, state = until_quiet(cell, lambda measured: measured[0], *retry)
        except Exception as exc:  # one broken cell must not hide the others' numbers
            message = str(exc).splitlines()[0] if str(exc) else ""
            note = f"failed: {type(exc).__name__}: {message}"
            rows.append(Measurement(name, mode, 0.0, 0.0, 0.0, 0, 0, note=note))
            continue
        if mode == "eager":
            reference[name] = (row, state)
        elif name in reference:
            compare(row, reference[name][0], reference[name][1], state)
        rows.append(row)
    for name in own:
        rows += _own_rows(name, count(name), seed, device)
    share_flops(rows, machine_rates())
    # workloads reporting their own rows have no step to re-time: their flags stand as measured
    flagged = [(row, than) for row, than in flag_slower(rows) if row.workload not in own]
    if flagged and device.kind == "cpu":  # timed again in turn (a GPU's steps need its sync)
        confirm(flagged, lambda name, mode: _warm_step(name, mode, seed, device), count)
    order = {name: i for i, name in enumerate(names)}
    return sorted(rows, key=lambda r: order[r.workload])  # stable: modes keep their order


def write_outputs(
    rows: list[Measurement],
    out: str,
    chart: bool,
    device: Device = CPU,
    extra: dict[str, Any] | None = None,
) -> list[str]:
    """Write ``bench.json`` (and ``bench.png`` when matplotlib is present); returns paths.

    ``extra`` adds top-level keys to the JSON (``run``: whether it counts; ``peers``: goals).

    Example:
        >>> import tempfile
        >>> [os.path.basename(p) for p in write_outputs([], tempfile.mkdtemp(), chart=False)]
        ['bench.json']
    """
    os.makedirs(out, exist_ok=True)
    meta = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "device": describe(device),
        **asdict(machine_rates()),
        "machine_constants": asdict(machine_constants()),
        "blas_kernels": asdict(blas_core.choice()),
        "work_weights": asdict(work_weights()),
        "pool_work": asdict(pool_work()),
    }
    path = os.path.join(out, "bench.json")
    with open(path, "w") as f:
        results = [r.as_dict() for r in rows]
        json.dump({"meta": meta, "results": results, **(extra or {})}, f, indent=2)
    written = [path]
    if chart:
        png = _chart(rows, os.path.join(out, "bench.png"))
        if png:
            written.append(png)
    return written


def chart_modes(rows: list[Measurement]) -> list[str]:
    """The modes the chart draws: every mode that measured something, ``--passes`` ones too.

    Example:
        >>> modes = ("eager", "compiled[dce]")
        >>> chart_modes([Measurement("w", m, 1.0, 1.0, 1.0, 3, 0) for m in modes])
        ['eager', 'compiled[dce]']
    """
    return list(dict.fromkeys(r.mode for r in rows if r.repeats))


def _chart(rows: list[Measurement], path: str) -> str | None:
    try:
        import matplotlib  # noqa: PLC0415 - optional (the bench/dev extras install it)

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
        from matplotlib.patches import Patch  # noqa: PLC0415
    except ImportError:
        return None
    names = list(dict.fromkeys(r.workload for r in rows))
    modes = chart_modes(rows)
    fig, ax = plt.subplots(figsize=(1.6 * len(names) + 2, 3.5))
    handles = []
    for k, mode in enumerate(modes):
        cells = [next((r for r in rows if r.workload == n and r.mode == mode), None) for n in names]
        values = [c.ms_median if c is not None and c.repeats else 0 for c in cells]
        width = 0.8 / len(modes)
        offset = (k - (len(modes) - 1) / 2) * width  # groups centred on their tick
        bars = ax.bar(np.arange(len(names)) + offset, values, width)
        handles.append(Patch(facecolor=bars.patches[0].get_facecolor(), label=mode))
        for bar, cell in zip(bars, cells):
            if cell is not None and cell.noisy:
                bar.set_hatch("//")  # a noisy timing: not a number to compare
    ax.set_xticks(np.arange(len(names)), names)
    ax.set_ylabel("ms / step (median)")
    ax.set_yscale("log")
    if any(r.noisy for r in rows):
        ax.set_title("hatched: noisy timing (spread > median)", fontsize=8)
    ax.legend(handles=handles)
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


def _names(spec: str | None, device: Device, peers: bool = False) -> list[str]:
    if spec is None:
        return list(ISSUE_WORKLOADS) if peers else default_workloads(device)
    names, unknown = resolve_names(spec)
    if unknown:
        known = [*WORKLOADS, *ALIASES]
        raise ValueError(f"unknown workloads {unknown}; choose from {known}")
    return names


def _warmup(name: str) -> int:
    return WORKLOADS[name].warmup


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dualflow bench``; returns the exit status.

    0 when every cell ran, 1 when some failed (their rows say why), 2 for a bad argument.

    Example:
        >>> main(["--workloads", "nope", "--no-chart"])  # the message goes to stderr
        2
    """
    args = _parser().parse_args(argv)
    try:
        device = resolve_device(args.device)
        names = _names(args.workloads, device, args.peers)
        modes = MODES
        if args.passes is not None:
            modes = (*MODES, f"compiled[{','.join(resolve_passes(args.passes))}]")
    except (DeviceError, ValueError) as exc:
        print(f"dualflow bench: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    scale = 10.0 if args.full else 1.0
    wait = section.idle_wait(args)
    retry = (args.max_spread, args.attempts)
    rows = run(names, scale, args.seed, args.repeats, modes, device, wait, retry)
    peer_rows, text, extra = section.report(
        args,
        names,
        rows,
        lambda n: repeats_of(n, scale, args.repeats),
        _warmup,
        lambda name, mode: _warm_step(name, mode, args.seed, device),
    )
    print(format_table(rows))
    print(summary(rows))
    print(machine_rates().describe())  # the yardsticks of the % GEMM and % BW columns
    print(machine_constants().describe())  # what the passes and kernels decided by
    print(blas_core.choice().describe())  # whose GEMMs the plans ran
    print(f"{work_weights().describe()}; {pool_work().describe()}")
    print(text)
    goal = memory_goal_lines(rows)  # issue 42's memory rows, when they ran
    if goal:
        print("\n".join(goal))
    rows += peer_rows
    if args.compare_to:
        print(compare_to(rows, args.compare_to))
    for path in write_outputs(rows, args.out, not args.no_chart, device, extra):
        print(f"wrote {path}")
    failed = [f"{r.workload} {r.mode}" for r in rows if (r.note or "").startswith("failed")]
    if failed:
        print(f"dualflow bench: failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0
