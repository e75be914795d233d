"""Each goal's two sides timed in alternation: dualflow's step and the peer's, round by round.

The table's cells are measured minutes apart, and this VM's speed drifts between them by more
than some goals' margins: in two runs an hour apart the copy bandwidth read 38.1 and 28.8 GB/s
and the same compiled elementwise kernels took 1.47 and 2.85 ms, with no other process on the
CPUs. So every goal is also judged on alternated rounds: the peer's step is kept warm in its own
process (``child.py serve``), and each round times ``calls`` of dualflow's step, then ``calls``
of the peer's. A round's ratio compares two blocks of calls a second apart; the goal takes the
median over the rounds, and the spread of the rounds' ratios is printed beside it.
"""

from __future__ import annotations

import json
import math
import queue
import statistics
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dualflow.bench import core_sharing
from dualflow.bench.core_sharing import shared
from dualflow.bench.harness import time_calls
from dualflow.bench.peers.child import MARKER, deciles
from dualflow.bench.peers.runner import CHILD, peer_env

ROUNDS = 5  # alternated rounds per goal (--alternate-rounds)
ROUND_S = 0.5  # seconds each side of a round takes, about: ``calls`` from the cell's median
FRAMEWORK_OF = {"torch eager": "torch", "jax jit": "jax"}
# A round is the peer's own slow phase, and left out, when the peer's block took over this many
# times its cell's time relative to how our block compared with ours: a served JAX poly-chain
# step ran three of five blocks at ~5x its cell's time while ours held its own, which made the
# goal's median ratio 0.2x (and a goal's verdict must never get easier by a peer's slow phase).
SLOW_PEER = 2.0


@dataclass
class Alternated:
    """One goal's alternated rounds: the calls each side timed a round, each round's ratio
    (``goals.evaluate`` takes their median)."""

    workload: str
    mode: str
    peer: str
    calls: int
    ratios: list[float]
    dropped: int = 0  # rounds left out: the peer's own slow phases (``SLOW_PEER``)
    on_shared: int = 0  # rounds left out: two CPUs shared one core around them (core_sharing)


class PeerServer:
    """A peer's step kept warm in its own process (``child.py serve``), timed on request."""

    def __init__(self, python: str, framework: str, workload: str, warmup: int, child: Path):
        argv = [python, str(child), "serve", framework, workload, str(warmup)]
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, env=peer_env(),
        )  # fmt: skip
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True, name="dualflow-peer-reader").start()

    def _read(self) -> None:
        for line in self.process.stdout or ():
            if line.startswith(MARKER):
                self.lines.put(line[len(MARKER) :])
        self.lines.put(None)  # the process ended

    def record(self, timeout: float) -> dict[str, Any]:
        """The next marked JSON object the peer printed; ValueError when it printed none in
        ``timeout`` seconds, ended, or printed something other than an object."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise ValueError(f"the peer said nothing in {timeout:g} s") from None
        if line is None:
            raise ValueError(f"the peer ended (exit {self.process.wait()})")
        record = json.loads(line)
        if not isinstance(record, dict):
            raise ValueError("the peer's answer is not a JSON object")
        return record

    def time(self, calls: int, timeout: float) -> list[float]:
        """Milliseconds of ``calls`` calls of the peer's step, one by one."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(f"time {calls}\n")
            self.process.stdin.flush()
        except OSError:  # it ended before reading: the same failure as ending after it
            raise ValueError(f"the peer ended (exit {self.process.wait()})") from None
        times = self.record(timeout).get("times_ms")
        ok = isinstance(times, list) and len(times) == calls
        if not ok or not all(isinstance(t, int | float) and math.isfinite(t) for t in times):
            raise ValueError("the peer's timings are not a list of finite numbers")
        return [max(0.0, float(t)) for t in times]

    def close(self) -> None:
        """Ask the peer to stop, and end it if it does not."""
        try:
            if self.process.stdin is not None:
                self.process.stdin.write("quit\n")
                self.process.stdin.close()
            self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()


def reference(times: list[float], varies: bool) -> float:
    """A block of the peer's calls as a goal reads it: the median, or the 10th percentile (its
    fast calls) for a peer whose calls vary on their own (``goals.reference_ms``).

    Example:
        >>> reference([1.0, 2.0, 3.0, 4.0, 5.0], False), reference([1.0, 2.0, 3.0, 4.0, 5.0], True)
        (3.0, 1.4)
    """
    return deciles(times)[0] if varies else statistics.median(times)


def rounds(
    ours: Callable[[], Any],
    server: PeerServer,
    calls: int,
    count: int,
    varies: bool,
    timeout: float = 600.0,
    cells: tuple[float, float] | None = None,
    sharing: Callable[[], float | None] | None = None,
) -> tuple[list[float], int]:
    """``count`` rounds of ``calls`` of our step, then ``calls`` of the peer's: each round's
    ratio of our median to the peer's ``reference``, and how many rounds were left out because
    two CPUs shared one core's arithmetic before or after them (``sharing``, else
    ``core_sharing.sharing_ratio``, probed between rounds). With ``cells`` (our cell's median
    ms, the peer's cell reference ms) a round whose peer block slowed ``SLOW_PEER`` times more
    than ours, each against its cell, is left out too (not counted in the second number)."""
    sharing = sharing or core_sharing.sharing_ratio
    ratios, on_shared = [], 0
    before = sharing()
    for _ in range(count):
        # an untimed call first on each side: the first after the other's block runs cold
        # (caches, sleeping threads: 80-100 ms against 35 for small-cnn's step)
        mine = statistics.median(time_calls(ours, calls, 1).tolist()) * 1e3
        theirs = max(reference(server.time(calls, timeout), varies), 1e-9)
        after = sharing()
        if shared(before) or shared(after):
            on_shared += 1  # another machine's round: both sides may have slowed unlike
        elif cells is None or not _peer_slowed(mine, theirs, cells):
            ratios.append(mine / theirs)
        before = after
    return ratios, on_shared


def _peer_slowed(mine: float, theirs: float, cells: tuple[float, float]) -> bool:
    """Whether the peer's block slowed ``SLOW_PEER`` times more than ours against the cells.

    Example:
        >>> _peer_slowed(1.0, 5.0, (1.0, 1.0)), _peer_slowed(3.0, 5.0, (1.0, 1.0))
        (True, False)
    """
    ours_cell, peer_cell = (max(ms, 1e-9) for ms in cells)
    return (theirs / peer_cell) > SLOW_PEER * (mine / ours_cell)


def calls_for(median_ms: float, round_s: float = ROUND_S) -> int:
    """Calls per side of a round: about ``round_s`` of the cell's median, 3 to 500.

    Example:
        >>> calls_for(300.0), calls_for(4.0), calls_for(0.01)
        (3, 125, 500)
    """
    return max(3, min(500, round(round_s * 1e3 / max(median_ms, 1e-6))))


def alternate(
    goal: tuple[str, str, str],
    ours: Callable[[], Any],
    median_ms: float,
    varies: bool,
    peer: tuple[str, int],
    count: int = ROUNDS,
    child: Path = CHILD,
    peer_ms: float | None = None,
) -> Alternated:
    """One goal (workload, our mode, peer mode) timed in ``count`` alternated rounds: ``ours``
    is a warm step of our mode (its cell's median ``median_ms``), ``peer`` the peers' python
    and their warm-up calls, ``peer_ms`` the peer cell's reference (rounds where the peer alone
    slowed are left out; a ValueError when every round was).

    Example:
        >>> alternate(("mlp", "compiled", "jax jit"), lambda: None, 1.0, False,
        ...           ("/nonexistent/python", 1))
        Traceback (most recent call last):
        ...
        FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent/python'
    """
    workload, mode, peer_mode = goal
    python, warmup = peer
    server = PeerServer(python, FRAMEWORK_OF[peer_mode], workload, warmup, child)
    try:
        ready = server.record(timeout=600.0)
        if not ready.get("ready"):
            raise ValueError(str(ready.get("skip") or ready.get("error") or ready))
        calls = calls_for(median_ms)
        cells = None if peer_ms is None else (median_ms, peer_ms)
        ratios, on_shared = rounds(ours, server, calls, count, varies, cells=cells)
    finally:
        server.close()
    if count and not ratios:
        raise ValueError(
            f"all {count} rounds left out: {on_shared} with two CPUs sharing a core, the rest "
            f"with the peer alone over {SLOW_PEER:g}x its cell"
        )
    slowed = count - len(ratios) - on_shared
    return Alternated(workload, mode, peer_mode, calls, ratios, slowed, on_shared)
