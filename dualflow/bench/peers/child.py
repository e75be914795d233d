"""One peer measurement in a fresh process: ``python child.py FRAMEWORK WORKLOAD REPEATS WARMUP``
(workload ``-``: only check that the framework imports).

Runs as a plain script under the peers' interpreter (stdlib only here; the framework module is
imported from this file's folder), times the workload's step like ``dualflow.bench.harness`` and
prints exactly one line ``DUALFLOW_PEER_RESULT {json}``: the timings, or ``{"skip": why}`` when
the framework is not importable, or ``{"error": why}`` when the workload failed.
"""

from __future__ import annotations

import importlib
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

MARKER = "DUALFLOW_PEER_RESULT "
MODULES = {"torch": "torch_workloads", "jax": "jax_workloads", "numpy": "floor_workloads"}
PROBE = "-"  # the workload name that only checks the framework imports (and reports its version)


def time_step(
    step: Callable[[], Any], sync: Callable[[Any], Any], repeats: int, warmup: int
) -> dict[str, float]:
    """Milliseconds of the first call, then (after the other warm-up calls) ``repeats`` timed
    calls: median, min and max; ``sync`` waits for the result inside the timed region.

    Example:
        >>> r = time_step(lambda: 1, lambda out: None, repeats=3, warmup=2)
        >>> r["repeats"], r["min_ms"] <= r["median_ms"] <= r["max_ms"]
        (3, True)
    """
    start = time.perf_counter()
    sync(step())
    first = time.perf_counter() - start
    for _ in range(warmup - 1):
        sync(step())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        sync(step())
        times.append(time.perf_counter() - start)
    return {
        "median_ms": statistics.median(times) * 1e3,
        "min_ms": min(times) * 1e3,
        "max_ms": max(times) * 1e3,
        "first_ms": first * 1e3,
        "repeats": repeats,
    }


def _framework_module(framework: str) -> Any:
    # As a script (the peers' interpreter, no dualflow there) this file's folder is sys.path[0];
    # imported from the package, the sibling module is imported relative to it.
    if __package__:
        return importlib.import_module(f".{MODULES[framework]}", __package__)
    return importlib.import_module(MODULES[framework])


def measure(framework: str, workload: str, repeats: int, warmup: int) -> dict[str, Any]:
    """The result record of one peer cell (what ``main`` prints after the marker).

    Example:
        >>> measure("nope", "mlp", 1, 1)
        {'error': "unknown peer framework 'nope'"}
    """
    if framework not in MODULES:
        return {"error": f"unknown peer framework {framework!r}"}
    try:
        importlib.import_module(framework)
    except ImportError as exc:
        return {"skip": f"{framework} is not importable by {sys.executable}: {exc}"}
    module = _framework_module(framework)
    if workload == PROBE:
        return {"probe": True, "mode": module.MODE, "version": module.VERSION}
    if workload not in module.WORKLOADS:
        return {"skip": f"no {framework} version of {workload}"}
    try:
        step, sync = module.WORKLOADS[workload]()
        result = time_step(step, sync, repeats, warmup)
    except Exception as exc:  # reported as the row's note, like a failed dualflow cell
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    return {**result, "mode": module.MODE, "version": module.VERSION}


def main(argv: list[str]) -> int:
    """Parse ``FRAMEWORK WORKLOAD REPEATS WARMUP``, measure, print the one marked line.

    Example:
        >>> main(["nope", "mlp", "1", "1"])
        DUALFLOW_PEER_RESULT {"error": "unknown peer framework 'nope'"}
        0
    """
    framework, workload, repeats, warmup = argv
    print(MARKER + json.dumps(measure(framework, workload, int(repeats), int(warmup))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
