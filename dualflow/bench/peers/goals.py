"""The issue's goals against the peers, and the side-by-side table that checks them.

A goal says dualflow's ``mode`` row (eager or compiled) must take at most ``factor`` times the
peer row's median ms/step; ``evaluate`` computes each ratio within this one run and ``format``
prints dualflow's and the peers' rows next to each other with the goal and whether it holds.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from dualflow.bench.harness import Measurement

TORCH, JAX = "torch eager", "jax jit"
FLOOR = "python floor"  # floor_workloads: a tape of closures over numpy, nothing checked


@dataclass(frozen=True)
class Goal:
    """dualflow's ``mode`` median ≤ ``factor`` × the ``peer`` row's median; ``text`` as the
    issue writes it."""

    mode: str
    peer: str
    factor: float
    text: str


@dataclass
class GoalResult:
    """One goal of one workload in one run: the ratio (None when a row is missing) and verdict;
    with alternated rounds (``peers/alternate.py``) the ratio is theirs, the cells' beside it."""

    workload: str
    goal: str
    ratio: float | None
    holds: bool | None
    busy: bool
    cell_ratio: float | None = None  # the table cells' ratio, when rounds decided
    rounds: list[float] | None = None  # each alternated round's ratio


def has_avx512(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether the CPU has AVX-512 (its ``avx512f`` flag); False where that cannot be read.

    Example:
        >>> has_avx512("/no/such/file")
        False
    """
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as file:
            return any(line.startswith("flags") and " avx512f" in line for line in file)
    except OSError:
        return False


# issue 38: the elementwise chain ≤ JAX where the CPU has AVX2, ≤ 0.7× JAX with AVX-512 (its
# wider vectors are what our numba kernels use and XLA's do not reach on this chain)
_ELEMENTWISE = 0.7 if has_avx512() else 1.0
_VISION = (
    Goal("compiled", TORCH, 1.0, "≤ 1.0× PyTorch eager"),
    Goal("eager", TORCH, 1.3, "eager ≤ 1.3× PyTorch eager"),
)
GOALS: dict[str, tuple[Goal, ...]] = {
    "tiny-ops": (
        Goal("compiled", JAX, 1.0, "≤ JAX"),
        Goal("eager", TORCH, 1.0, "eager ≤ 1.0× PyTorch eager"),
    ),
    "mlp": (Goal("compiled", JAX, 1.0, "≤ JAX"),),
    "elementwise": (Goal("compiled", JAX, _ELEMENTWISE, f"≤ {_ELEMENTWISE}× JAX"),),
    "poly-chain": (Goal("compiled", JAX, 1.0, "≤ JAX"),),
    "small-cnn": _VISION,
    "resnet18": _VISION,
    "gradient-penalty-mlp": (Goal("compiled", JAX, 1.0, "≤ JAX"),),
    "per-example-grads": (Goal("compiled", TORCH, 1.0, "≤ 1.0× torch.func"),),
    "transformer-lm": (Goal("compiled", TORCH, 1.0, "≤ 1.0× PyTorch eager"),),
    "lstm-lm": (Goal("compiled", TORCH, 1.0, "≤ 1.0× PyTorch eager"),),
}
ISSUE_WORKLOADS = tuple(GOALS)  # what `dualflow bench --peers` runs without --workloads


def find(rows: Sequence[Measurement], workload: str, mode: str) -> Measurement | None:
    """The measured row of (workload, mode) in ``rows``, or None.

    Example:
        >>> find([Measurement("mlp", JAX, 4.0, 4.0, 4.0, 3, 0)], "mlp", JAX).ms_median
        4.0
    """
    return next((r for r in rows if r.workload == workload and r.mode == mode and r.repeats), None)


def reference_ms(peer: Measurement) -> float:
    """The peer's time a goal is judged against: its median, or its 10th percentile (its fast
    calls) when its timings vary on their own on an idle machine (``idle.varies_alone``), so a
    peer's slow phases never make a goal easier.

    Example:
        >>> row = Measurement("w", JAX, 0.1, 0.03, 0.2, 9, 0, ms_p10=0.04, ms_p90=0.15, varies=True)
        >>> reference_ms(row), reference_ms(Measurement("w", JAX, 0.1, 0.03, 0.2, 9, 0))
        (0.04, 0.1)
    """
    return peer.bounds()[0] if peer.varies else peer.ms_median


def evaluate(
    rows: Sequence[Measurement], rounds: dict[tuple[str, str, str], list[float]] | None = None
) -> list[GoalResult]:
    """Every goal of the workloads present in ``rows``: dualflow's median against the peer's
    ``reference_ms``, or, where ``rounds`` has the goal's (workload, mode, peer), the median of
    its alternated rounds' ratios (the cells' ratio is kept beside it).

    Example:
        >>> rows = [Measurement("mlp", "compiled", 4.0, 4.0, 4.0, 3, 0),
        ...         Measurement("mlp", "jax jit", 5.0, 5.0, 5.0, 3, 0)]
        >>> [(r.goal, r.ratio, r.holds) for r in evaluate(rows)]
        [('≤ JAX', 0.8, True)]
        >>> [(r.ratio, r.cell_ratio) for r in evaluate(rows, {("mlp", "compiled", JAX): [1.1]})]
        [(1.1, 0.8)]
    """
    results = []
    for workload in dict.fromkeys(r.workload for r in rows):
        for goal in GOALS.get(workload, ()):
            ours, peer = find(rows, workload, goal.mode), find(rows, workload, goal.peer)
            if ours is None or peer is None:
                results.append(GoalResult(workload, goal.text, None, None, False))
                continue
            ratio = ours.ms_median / reference_ms(peer)
            busy = ours.busy or peer.busy
            result = GoalResult(workload, goal.text, ratio, ratio <= goal.factor, busy)
            alternated = (rounds or {}).get((workload, goal.mode, goal.peer))
            if alternated:
                result.cell_ratio, result.rounds = ratio, alternated
                result.ratio = statistics.median(alternated)
                result.holds = result.ratio <= goal.factor
            results.append(result)
    return results


def _ms(row: Measurement | None) -> str:
    if row is None:
        return "-"
    low, high = row.bounds()
    return f"{row.ms_median:.3f} ({low:.3f}–{high:.3f})"


def _ratio(a: Measurement | None, b: Measurement | None) -> str:
    if a is None or b is None:
        return "-"
    return f"{a.ms_median / reference_ms(b):.2f}x" + (" (vs p10)" if b.varies else "")


def _holds(result: GoalResult) -> str:
    if result.holds is None:
        return "- (no peer row)"
    verdict = ("yes" if result.holds else "NO") + (" (busy)" if result.busy else "")
    if result.rounds:  # decided by the alternated rounds: their median and range
        low, high = min(result.rounds), max(result.rounds)
        verdict += f" ({result.ratio:.2f}x over {len(result.rounds)} rounds, {low:.2f}-{high:.2f})"
    return verdict


def _line(rows: Sequence[Measurement], workload: str, rounds: dict | None) -> list[str]:
    eager, compiled = find(rows, workload, "eager"), find(rows, workload, "compiled")
    torch, jax = find(rows, workload, TORCH), find(rows, workload, JAX)
    results = evaluate([r for r in rows if r.workload == workload], rounds)
    busy = [r for r in (eager, compiled, torch, jax) if r is not None and r.busy]
    alone = [r.mode for r in (torch, jax) if r is not None and r.varies]
    note = "busy: spread too wide" if busy else ""
    if alone:
        note = "; ".join([*filter(None, [note]), f"{', '.join(alone)}: varies on an idle machine"])
    return [
        workload,
        *(_ms(r) for r in (eager, compiled, torch, jax)),
        _ratio(compiled, torch),
        _ratio(compiled, jax),
        _ratio(eager, torch),
        "; ".join(r.goal for r in results) or "-",
        "; ".join(_holds(r) for r in results) or "-",
        note,
    ]


HEADER = ["workload", "eager ms", "compiled ms", f"{TORCH} ms", f"{JAX} ms"]
HEADER += ["compiled/torch", "compiled/jax", "eager/torch", "goal", "holds", "note"]


def format_table(
    rows: Sequence[Measurement], notes: Sequence[str], footer: str, rounds: dict | None = None
) -> str:
    """dualflow's eager and compiled rows beside the peers' (ms/step median (p10–p90)), the
    ratios, each workload's goals and whether they hold; the skip notes, then the footer.

    Example:
        >>> rows = [Measurement("mlp", "compiled", 4.0, 4.0, 4.0, 3, 0)]
        >>> print(format_table(rows, ["jax peers skipped: no jax"], "busy: ..."))
        ... # doctest: +NORMALIZE_WHITESPACE
        workload  eager ms  compiled ms  torch eager ms  jax jit ms  compiled/torch  compiled/jax
          eager/torch  goal  holds  note
        mlp  -  4.000 (4.000–4.000)  -  -  -  -  -  ≤ JAX  - (no peer row)
        jax peers skipped: no jax
        busy: ...
    """
    lines = [_line(rows, w, rounds) for w in dict.fromkeys(r.workload for r in rows)]
    widths = [max(len(c) for c in col) for col in zip(HEADER, *lines)]
    text = [
        "  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in [HEADER, *lines]
    ]
    return "\n".join([*text, *floor_lines(rows), *notes, footer])


def floor_lines(rows: Sequence[Measurement]) -> list[str]:
    """One line per workload with a python-floor row: the floor's median beside the eager goal's
    budget and dualflow's eager median, both as multiples of it.

    Example:
        >>> rows = [Measurement("tiny-ops", m, ms, ms, ms, 3, 0)
        ...         for m, ms in (("eager", 2.0), (TORCH, 1.0), (FLOOR, 0.5))]
        >>> print(floor_lines(rows)[0])  # doctest: +NORMALIZE_WHITESPACE
        tiny-ops in a python floor (a tape of closures over numpy, nothing checked): 0.500 ms;
        the eager goal allows 1.000 ms (2.00x the floor), dualflow eager takes 2.000 ms (4.00x)
    """
    lines = []
    for workload in dict.fromkeys(r.workload for r in rows):
        floor = find(rows, workload, FLOOR)
        eager, torch = find(rows, workload, "eager"), find(rows, workload, TORCH)
        goal = next((g for g in GOALS.get(workload, ()) if g.mode == "eager"), None)
        if floor is None or eager is None or torch is None or goal is None:
            continue
        budget = goal.factor * torch.ms_median
        lines.append(
            f"{workload} in a python floor (a tape of closures over numpy, nothing checked): "
            f"{floor.ms_median:.3f} ms; the eager goal allows {budget:.3f} ms "
            f"({budget / floor.ms_median:.2f}x the floor), dualflow eager takes "
            f"{eager.ms_median:.3f} ms ({eager.ms_median / floor.ms_median:.2f}x)"
        )
    return lines
