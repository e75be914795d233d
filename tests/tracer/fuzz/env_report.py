"""Issue 35's fuzzer as a report: each construct's outcome on its own, then the outcome counts of
random programs, with the time per program.

Run from the repository root: ``python -m tests.tracer.fuzz.env_report [PROGRAMS] [FIRST_SEED]
[--all]`` (``--all``: also draw constructs listed in ``env_known.KNOWN_SILENT``).
"""

from __future__ import annotations

import sys
import time
from collections import Counter

from tests.tracer.fuzz.env_compare import OUTCOMES, Verdict, verdict
from tests.tracer.fuzz.env_draw import cases, draw, minimal
from tests.tracer.fuzz.env_known import KNOWN_SILENT, avoided


def construct_table() -> dict[str, Verdict]:
    """Every ``construct/mutation`` case's verdict on its own minimal program."""
    return {case: verdict(minimal(case)) for case in cases()}


def random_counts(
    programs: int, first_seed: int = 0, avoid: set[str] = frozenset()
) -> tuple[Counter, dict[str, list[int]], float]:
    """Outcome counts of ``programs`` drawn programs, the seeds of each non-equal outcome, and
    the seconds per program."""
    counts: Counter = Counter()
    seeds: dict[str, list[int]] = {}
    start = time.perf_counter()
    for seed in range(first_seed, first_seed + programs):
        outcome = verdict(draw(seed, avoid)).outcome
        counts[outcome] += 1
        if outcome != "equal":
            seeds.setdefault(outcome, []).append(seed)
    return counts, seeds, (time.perf_counter() - start) / max(programs, 1)


def main(argv: list[str]) -> None:
    """Print the construct table and the random programs' counts."""
    flags = [a for a in argv if a.startswith("--")]
    args = [int(a) for a in argv if not a.startswith("--")]
    programs, first = (args + [1000, 0][len(args) :])[:2]
    table = construct_table()
    for case, v in table.items():
        known = "  (KNOWN_SILENT)" if case in KNOWN_SILENT else ""
        print(f"{case:36} {v.outcome:7} {v.detail.splitlines()[0] if v.detail else ''}{known}")
    print(Counter(v.outcome for v in table.values()))
    avoid = set() if "--all" in flags else avoided()
    counts, seeds, per = random_counts(programs, first, avoid)
    print(
        f"{programs} random programs (seeds {first}..): "
        + ", ".join(f"{o} {counts[o]}" for o in OUTCOMES)
        + f"; {per * 1000:.0f} ms per program"
    )
    for outcome, found in seeds.items():
        print(f"  {outcome}: seeds {found[:30]}")


if __name__ == "__main__":
    main(sys.argv[1:])
