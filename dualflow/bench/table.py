"""The bench's text table: one row per (workload, mode), the columns a row has numbers for, and
the shares of the machine's measured GEMM rate and bandwidth for rows that count FLOPs or bytes
(``dualflow.runtime.machine_rates``), and ``% alone``: a compiled row's matmul steps' time alone in
numpy (same shapes and layouts, ``runtime.gemm_alone``) over their time inside its plans."""

from __future__ import annotations

from dualflow.bench.harness import Measurement
from dualflow.bench.modes import MATCH_ABS
from dualflow.runtime.machine_rates import MachineRates


def add_rates(
    row: Measurement, flops: float | None, moved: float | None, rates: MachineRates
) -> None:
    """Fill ``row``'s rates from its step's natural work (``flops`` of its GEMMs/convolutions,
    ``moved`` bytes a fused kernel must read and write) and their shares of ``rates``.

    Example:
        >>> row = Measurement("w", "compiled", 2.0, 1.9, 2.1, 10, 0)
        >>> add_rates(row, 4e8, None, MachineRates(400.0, 20.0, 2))
        >>> row.gflops, row.gemm_share, row.gbps
        (200.0, 0.5, None)
    """
    seconds = row.ms_median * 1e-3
    if seconds <= 0:
        return
    if flops:
        row.gflops = flops / seconds / 1e9
        row.gemm_share = rates.gemm_share(row.gflops)
    if moved:
        row.gbps = moved / seconds / 1e9
        row.bandwidth_share = rates.bandwidth_share(row.gbps)


def share_flops(rows: list[Measurement], rates: MachineRates) -> None:
    """Rows without a FLOP count (eager ones: no plan to count) take their workload's from a
    row that has one (every mode runs the same step).

    Example:
        >>> rates = MachineRates(400.0, 20.0, 2)
        >>> rows = [Measurement("w", "eager", 4.0, 4, 4, 3, 0)]
        >>> rows.append(Measurement("w", "c", 2.0, 2, 2, 3, 0))
        >>> add_rates(rows[1], 4e8, None, rates)
        >>> share_flops(rows, rates); rows[0].gflops
        100.0
    """
    per_step = {r.workload: r.gflops * r.ms_median * 1e6 for r in rows if r.gflops}
    for row in rows:
        if row.gflops is None and row.workload in per_step:
            add_rates(row, per_step[row.workload], None, rates)


def _opt(value: float | None, fmt: str, suffix: str = "") -> str:
    return "-" if value is None else format(value, fmt) + suffix


def _match(r: Measurement) -> str:
    if r.max_diff is None:
        return "-"
    ok = r.matches if r.matches is not None else r.max_diff <= MATCH_ABS
    rel = "" if r.max_rel_diff is None else f", rel {r.max_rel_diff:.1e}"
    return f"{'yes' if ok else 'NO'} (abs {r.max_diff:.1e}{rel})"


_COLUMNS = (
    ("ms/step (p10-p90)", lambda r: "{:.3f} ({:.3f}-{:.3f})".format(r.ms_median, *r.bounds())),
    (
        "speedup",
        lambda r: "noisy" if r.noisy and r.speedup is None else _opt(r.speedup, ".2f", "x"),
    ),
    ("peak MB", lambda r: f"{r.peak_bytes / 2**20:.2f}"),
    ("held MB", lambda r: _opt(None if r.held_bytes is None else r.held_bytes / 2**20, ".2f")),
    ("mem ratio", lambda r: _opt(r.mem_ratio, ".2f")),
    ("compile ms", lambda r: _opt(r.compile_ms, ".1f")),
    ("steps/call", lambda r: _opt(r.steps, "d")),
    ("baseline ms", lambda r: _opt(r.baseline_ms, ".3f")),
    ("traces/plan runs", lambda r: "-" if r.traces is None else f"{r.traces}/{r.plan_runs}"),
    ("vs static", lambda r: _opt(r.static_ratio, ".2f", "x")),
    ("GB/s", lambda r: _opt(r.gbps, ".1f")),
    ("% BW", lambda r: _opt(None if r.bandwidth_share is None else 100 * r.bandwidth_share, ".0f")),
    ("GFLOP/s", lambda r: _opt(r.gflops, ".1f")),
    ("% GEMM", lambda r: _opt(None if r.gemm_share is None else 100 * r.gemm_share, ".0f")),
    ("% alone", lambda r: _opt(None if r.gemm_alone is None else 100 * r.gemm_alone, ".0f")),
    ("matches eager", _match),
)


_NOISY = "noisy: p10-p90 spread wider than the median (busy machine); rerun, e.g. with --full"


def _note(row: Measurement) -> str:
    notes = [row.note, _NOISY if row.noisy and row.repeats else None]
    notes.append(f"SLOWER than {row.slower}" if row.slower else None)
    if row.busy and not row.noisy:
        crowd = row.others_during or 0.0
        notes.append(
            f"busy: others took {crowd:.0%} of the CPUs" if crowd else "busy: spread too wide"
        )
    if row.idle is False:
        notes.append(f"machine not idle (others used {row.others_cpu or 0.0:.0%} of the CPUs)")
    return "; ".join(n for n in notes if n)


def format_table(rows: list[Measurement]) -> str:
    """Render the rows as a fixed-width text table (``GB/s`` and ``note`` when a row has one).

    ``steps/call`` is the kernels and guards a compiled plan runs per call, and the ops (one
    kernel each) an eager call dispatches.

    Example:
        >>> print(format_table([Measurement("w", "eager", 1.0, 0.9, 1.2, 10, 2048)]))
        ... # doctest: +NORMALIZE_WHITESPACE
        workload  mode   ms/step (p10-p90)    speedup  peak MB  mem ratio  compile ms  steps/call
          baseline ms  matches eager
        w         eager  1.000 (0.900-1.200)  -        0.00     -          -           -
          -            -
    """
    shown = {"GB/s": any(r.gbps for r in rows), "held MB": any(r.held_bytes for r in rows)}
    shown["% BW"] = any(r.bandwidth_share is not None for r in rows)
    shown["GFLOP/s"] = shown["% GEMM"] = any(r.gflops for r in rows)
    shown["% alone"] = any(r.gemm_alone is not None for r in rows)
    shown["traces/plan runs"] = any(r.traces is not None for r in rows)  # variable shapes
    shown["vs static"] = any(r.static_ratio is not None for r in rows)
    columns = [c for c in _COLUMNS if shown.get(c[0], True)]
    header = ("workload", "mode", *(title for title, _ in columns))
    lines = [
        (r.workload, r.mode, *(cell(r) if r.repeats else "-" for _, cell in columns))
        for r in rows  # a row without repeats is a note-only row (skipped or failed)
    ]
    notes = [_note(r) for r in rows]
    if any(notes):
        header += ("note",)
        lines = [(*line, note) for line, note in zip(lines, notes)]
    widths = [max(len(str(c)) for c in col) for col in zip(header, *lines)]
    return "\n".join(
        "  ".join(str(c).ljust(w) for c, w in zip(line, widths)).rstrip()
        for line in [header, *lines]
    )
