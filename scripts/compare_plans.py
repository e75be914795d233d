"""Is a bench workload's compiled step slower with the default passes than at O0, and where?
(issue 38: "no workload compiled slower than O0 or than eager").

One process builds the workload in each mode (eager, compiled-O0, compiled), then times the
steps call by call in turn (a change of the machine's load hits every mode alike), printing wall
and CPU time (min, 25th percentile, median). Then it profiles both compiled plans step by step
(``explain(profile=True)``'s timings, the minimum per step over the profiled runs, the order of
the modes swapped at every run) and prints the time per op of each. ``--cpu`` times the steps'
profile by the thread's CPU clock instead of the wall clock: with one thread
(``DUALFLOW_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 taskset -c 1``) that is the work each op does,
which other processes on a shared machine barely move.

    python scripts/compare_plans.py lstm-lm [rounds] [profiled runs] [--cpu]
"""

from __future__ import annotations

import collections
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from dualflow.bench.modes import prepare
from dualflow.bench.workloads import WORKLOADS
from dualflow.device import CPU
from dualflow.tracer.explain_profile import request_profile

MODES = ("eager", "compiled-O0", "compiled")


def build(name: str) -> dict[str, Callable[[], Any]]:
    """The workload's step per mode, past its warm-up calls (traced, kernels compiled)."""
    from dualflow.kernels.numba import compile_worker  # noqa: PLC0415 - after the traces

    steps = {}
    for mode in MODES:
        built = WORKLOADS[name].build(np.random.default_rng(0), CPU)
        steps[mode] = prepare(mode, built["step"], built.get("compile"))
        for _ in range(WORKLOADS[name].warmup):
            steps[mode]()
    compile_worker.wait()
    for step in steps.values():
        step()  # the compiled kernels, loaded
    return steps


def alternate(steps: dict[str, Callable[[], Any]], rounds: int) -> None:
    """Print each mode's wall and CPU ms per step, the modes timed in turn."""
    wall: dict[str, list[float]] = collections.defaultdict(list)
    cpu: dict[str, list[float]] = collections.defaultdict(list)
    for _ in range(rounds):
        for mode, step in steps.items():
            start, used = time.perf_counter(), time.process_time()
            step()
            wall[mode].append((time.perf_counter() - start) * 1e3)
            cpu[mode].append((time.process_time() - used) * 1e3)
    for mode in steps:
        w, c = np.array(wall[mode]), np.array(cpu[mode])
        print(
            f"{mode:12s} wall min {w.min():9.3f} p25 {np.percentile(w, 25):9.3f} "
            f"median {np.median(w):9.3f} | cpu min {c.min():9.3f} median {np.median(c):9.3f}"
        )


def per_op(steps: dict[str, Callable[[], Any]], runs: int) -> dict[str, collections.Counter]:
    """Seconds per op of each compiled plan: every step's fastest profiled run, summed by op."""
    fastest: dict[str, dict[int, float]] = {mode: {} for mode in MODES[1:]}
    ops: dict[str, list[str]] = {}
    for k in range(runs):
        for mode in MODES[1:] if k % 2 == 0 else MODES[:0:-1]:
            step = steps[mode]
            request_profile(step)
            step()
            request_profile(step, on=False)
            plan = step.history[-1].plan
            ops[mode] = [node.op for node in plan.graph.nodes]
            for i, seconds in enumerate(plan.profile_times):
                fastest[mode][i] = min(fastest[mode].get(i, np.inf), float(seconds))
    totals = {}
    for mode, times in fastest.items():
        totals[mode] = collections.Counter()
        for i, seconds in times.items():
            totals[mode][ops[mode][i]] += seconds
    return totals


def print_ops(totals: dict[str, collections.Counter], rows: int = 25) -> None:
    """The ops by their largest time in either plan, with both plans' ms."""
    every = set().union(*totals.values())
    order = sorted(every, key=lambda op: -max(t[op] for t in totals.values()))
    print(f"{'op':24s}" + "".join(f"{mode:>16s}" for mode in totals))
    print(
        f"{'(all steps)':24s}" + "".join(f"{sum(t.values()) * 1e3:16.3f}" for t in totals.values())
    )
    for op in order[:rows]:
        print(f"{op:24s}" + "".join(f"{t[op] * 1e3:16.3f}" for t in totals.values()))


def main(argv: list[str]) -> None:
    """``compare_plans.py workload [rounds] [profiled runs] [--cpu]``."""
    cpu = "--cpu" in argv
    args = [a for a in argv if a != "--cpu"]
    name, rounds, runs = args[0], int(args[1]) if len(args) > 1 else 20, 6
    runs = int(args[2]) if len(args) > 2 else runs
    steps = build(name)
    alternate(steps, rounds)
    wall = time.perf_counter
    if cpu:  # the profiled programs' clock (``runtime/codegen.py`` reads it as it renders them)
        time.perf_counter = time.thread_time
    try:
        totals = per_op(steps, runs)
    finally:
        time.perf_counter = wall
    print_ops(totals)


if __name__ == "__main__":
    main(sys.argv[1:])
