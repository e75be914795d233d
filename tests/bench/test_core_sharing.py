"""The core-sharing probe: what it reads for one CPU named twice, that it leaves the caller's
affinity as it was, and how the bench treats a cell, a gate and a round on shared cores."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from dualflow.bench import core_sharing
from dualflow.bench.core_sharing import SHARED, allowed_cpus, shared, sharing_ratio
from dualflow.bench.harness import Measurement
from dualflow.bench.idle import mark_busy, until_quiet, verdict, wait_until_idle
from dualflow.bench.peers import alternate
from dualflow.bench.peers.alternate import rounds

needs_affinity = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or not allowed_cpus(), reason="no CPU affinity calls"
)


@needs_affinity
def test_two_threads_on_one_cpu_read_as_shared() -> None:
    """One CPU named twice is the extreme of two CPUs sharing one core's arithmetic: the two
    threads take turns, and the probe reads ~2 whatever the host does."""
    cpu = allowed_cpus()[0]
    assert sharing_ratio(settle_s=0.0, cpus=[cpu, cpu]) > SHARED


@needs_affinity
def test_the_probe_leaves_every_thread_where_it_was_allowed() -> None:
    before = os.sched_getaffinity(0)
    ratio = sharing_ratio(settle_s=0.0)
    assert os.sched_getaffinity(0) == before
    assert ratio is None or ratio > 0.5
    seen = []
    worker = threading.Thread(target=lambda: seen.append(os.sched_getaffinity(0)))
    worker.start()
    worker.join()
    assert seen == [before]  # a thread started later is not pinned either


def test_the_probe_takes_one_cpu_per_core_the_os_knows(tmp_path) -> None:
    """On a machine with hardware threads the OS reports (cpu0 and cpu2 one core, cpu1 and cpu3
    another), two threads of one core always share it: the probe keeps one CPU per core."""
    for cpu, siblings in {0: "0,2", 1: "1,3", 2: "0,2", 3: "1-1,3\n"}.items():
        folder = tmp_path / f"cpu{cpu}" / "topology"
        folder.mkdir(parents=True)
        (folder / "thread_siblings_list").write_text(siblings)
    assert core_sharing.one_per_core([0, 1, 2, 3], tmp_path) == [0, 1]
    assert core_sharing.one_per_core([2, 3], tmp_path) == [2, 3]  # an affinity of one of each
    assert core_sharing.one_per_core([0, 2], tmp_path) == [0]  # one core: the probe cannot say


def test_one_cpu_cannot_say() -> None:
    assert sharing_ratio(settle_s=0.0, cpus=[0]) is None


def _row(ratio: float | None) -> Measurement:
    row = Measurement("elementwise", "compiled", 1.5, 1.45, 1.55, 10, 0, idle=True)
    row.cores_shared = ratio
    return row


def test_a_cell_timed_on_shared_cores_is_measured_again_and_else_busy() -> None:
    ratios = iter([1.97, 2.01, 1.02])
    row = until_quiet(lambda: _row(next(ratios)), lambda r: r, 0.5, attempts=3)
    assert row.attempts == 3 and row.cores_shared == 1.02  # narrow spreads: only the probe
    mark_busy([row], 0.5)
    assert not row.busy and verdict([row], 0.5, gated=True)[0]
    row = until_quiet(lambda: _row(1.95), lambda r: r, 0.5, attempts=2)
    mark_busy([row], 0.5)
    counts, footer = verdict([row], 0.5, gated=True)
    assert row.busy and not counts and "two CPUs shared a core" in footer
    unknown = _row(None)  # a machine where the probe cannot say: judged as before
    mark_busy([unknown], 0.5)
    assert not unknown.busy


def test_the_gate_waits_for_the_cpus_to_compute_apart() -> None:
    readings = iter([2.0, 1.96, 1.01])
    clock = iter(range(100))
    check = wait_until_idle(
        30.0, probe=lambda: 0.02, clock=lambda: next(clock), sharing=lambda: next(readings)
    )
    assert check.idle and check.waited_s == 3.0
    probes = []
    check = wait_until_idle(0.0, probe=lambda: 0.02, sharing=lambda: probes.append(1) or 2.0)
    assert check.idle and check.waited_s >= 0.0  # gave up waiting: the cell's own probe says
    assert probes == [1]  # no wait left: probed once, then the cell is measured (and judged)


class _Peer:
    def time(self, calls: int, timeout: float) -> list[float]:
        return [2.0] * calls


def test_rounds_next_to_a_shared_reading_are_left_out(monkeypatch) -> None:
    monkeypatch.setattr(alternate, "time_calls", lambda step, n, warmup: np.full(n, 3e-3))
    readings = iter([1.0, 1.98, 1.0, 1.0, 1.0])  # probed before round 1 and after each round
    ratios, on_shared = rounds(lambda: None, _Peer(), 4, 4, False, sharing=lambda: next(readings))
    assert (ratios, on_shared) == ([1.5, 1.5], 2)  # rounds 1 and 2 touch the shared reading
    monkeypatch.setattr(core_sharing, "sharing_ratio", lambda *a, **k: 2.0)
    assert rounds(lambda: None, _Peer(), 4, 2, False) == ([], 2)  # the default probe


def test_shared_is_the_threshold() -> None:
    assert [shared(r) for r in (None, 1.0, SHARED, SHARED + 0.01)] == [False, False, False, True]
