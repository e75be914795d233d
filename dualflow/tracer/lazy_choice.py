"""Whether a function off the fast path runs faster by lazy re-execution or eagerly, measured.

Lazy re-execution runs the function's Python at every call and its ops as cached plans. For a
step of tiny ops the recording costs more than the plans save (the bench's tiny-ops: 1.75x its
eager time), and a step of a few large GEMMs gains nothing from plans. Both paths give eager's
results by construction (lazy re-execution is exact, all or nothing, like an undoable eager call),
so which of them runs a call is a matter of time alone, and the machine decides it: once the
lazy path is warm (no plan compiled and no kernel pending in the call), a few pairs of calls
alternate between the two, and the faster by its fastest call serves the next calls. Only the
second call of each pair is timed: what a call leaves to the next one (memory to free or fault
back in, caches) is then charged to the path that left it, as it is when one path runs alone.
A probe starts with the other path and ends with the chosen one, the path the next calls most
likely take: its return from the other path (caches refilled, a worker CPU woken up to speed:
poly-chain's lazy calls took 1.6, 1.4, 1.0 ms after eager ones, then 0.85) is paid inside the
probe, not by the calls after it.
The question is asked again after a hold that doubles each time the answer stands, so a change
of load, or of what the program records, is seen at a cost that shrinks to nothing.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

LAZY, EAGER = "lazy", "eager"


def _kernels_pending() -> bool:
    # The compile worker is imported only once a plan asked for a kernel: no import here.
    worker = sys.modules.get("dualflow.kernels.numba.compile_worker")
    return worker is not None and worker.pending() > 0


class LazyOrEager:
    """The path (lazy re-execution or eager) for each call of one function off the fast path.

    ``measured=False`` (``compile(lazy="always")``) runs every call lazily.

    Example:
        >>> choice = LazyOrEager(measured=True)
        >>> runs = [choice.call(lambda: LAZY, lambda: EAGER, lambda: False) for _ in range(3)]
        >>> runs, choice.eager_calls  # two warm calls, then a probe: the other path first
        (['lazy', 'lazy', 'eager'], 1)
    """

    WARM_CALLS = 2  # lazy calls in a row that compiled nothing, before the first probe
    PROBES = 3  # timed calls of each path per probe, each the second of a pair on that path
    FIRST_HOLD = 64  # calls on the chosen path before it is asked again (doubling, up to MAX)
    MAX_HOLD = 8192
    MARGIN = 1.05  # eager replaces lazy (and back) only when faster by more than 5%

    def __init__(self, measured: bool) -> None:
        self.measured = measured
        self.clock = time.perf_counter  # tests give a clock of their own
        self.chosen = LAZY
        self.eager_calls = 0  # calls run eagerly because lazy re-execution measured slower
        self.decisions: list[tuple[str, float, float]] = []  # (path, lazy s, eager s)
        self._warm = 0
        self._hold = 0  # calls left before the next probe
        self._next_hold = self.FIRST_HOLD
        self._cold_probes = 0  # probes restarted because the lazy path compiled in them
        self._probe_calls = 0  # calls of the probe under way
        self._times: dict[str, list[float]] = {LAZY: [], EAGER: []}

    def call(
        self, lazily: Callable[[], Any], eagerly: Callable[[], Any], compiling: Callable[[], bool]
    ) -> Any:
        """Run one call by the path chosen for it; ``compiling()`` says whether the lazy path
        compiled a plan (or left kernels pending) during the call just run."""
        path = self._path()
        self.eager_calls += path == EAGER
        start = self.clock()
        result = (lazily if path == LAZY else eagerly)()
        seconds = self.clock() - start
        if self.measured:
            self._observe(path, seconds, path == LAZY and (compiling() or _kernels_pending()))
        return result

    def _path(self) -> str:
        if not self.measured or self._warm < self.WARM_CALLS or self._hold > 0:
            return self.chosen
        other = EAGER if self.chosen == LAZY else LAZY
        return (other, self.chosen)[self._probe_calls // 2 % 2]  # pairs: other, other, mine, mine

    def _observe(self, path: str, seconds: float, cold: bool) -> None:
        if self._warm < self.WARM_CALLS:
            self._warm = 0 if cold else self._warm + 1
            return
        if self._hold > 0:
            self._hold -= 1
            return
        if cold:  # a plan compiled in a probe: the lazy path is not warm yet, probe again
            self._times, self._probe_calls = {LAZY: [], EAGER: []}, 0
            self._cold_probes += 1
            if self._cold_probes >= self.PROBES:  # it keeps compiling: ask again after a hold
                self._hold, self._cold_probes = self._next_hold, 0
            return
        self._probe_calls += 1
        if self._probe_calls % 2:  # the first of a pair pays what the other path left
            return
        self._times[path].append(seconds)
        if len(self._times[self.chosen]) == self.PROBES:  # the chosen path's pairs come last
            self._decide(min(self._times[LAZY]), min(self._times[EAGER]))

    def _decide(self, lazy: float, eager: float) -> None:
        other = EAGER if self.chosen == LAZY else LAZY
        mine, theirs = (lazy, eager) if self.chosen == LAZY else (eager, lazy)
        if theirs * self.MARGIN < mine:  # the other path wins: ask again soon
            self.chosen, self._next_hold = other, self.FIRST_HOLD
        self.decisions.append((self.chosen, lazy, eager))
        self._hold, self._cold_probes = self._next_hold, 0
        self._next_hold = min(2 * self._next_hold, self.MAX_HOLD)  # each answer that stands
        self._times, self._probe_calls = {LAZY: [], EAGER: []}, 0

    def describe(self) -> str | None:
        """One line for ``explain``: what the last probe measured and chose (None: none yet).

        Example:
            >>> LazyOrEager(measured=True).describe() is None
            True
        """
        if not self.decisions:
            return None
        path, lazy, eager = self.decisions[-1]
        return (
            f"  lazy re-execution {lazy * 1e3:.3f} ms against eager {eager * 1e3:.3f} ms a call "
            f"(fastest of {self.PROBES} timed each, {len(self.decisions)} probes): runs {path}; "
            f"{self.eager_calls} calls ran eagerly"
        )
