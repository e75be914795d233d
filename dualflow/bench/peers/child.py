"""One peer measurement in a fresh process: ``python child.py FRAMEWORK WORKLOAD REPEATS WARMUP``
(workload ``-``: only check that the framework imports), or ``python child.py serve FRAMEWORK
WORKLOAD WARMUP``: a peer's step kept warm, timed on request (``serve``).

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


def deciles(times: list[float]) -> tuple[float, float]:
    """The 10th and 90th percentiles of ``times`` (linear between order statistics, as
    ``numpy.percentile``): the bench's spread is theirs, so one call the OS interrupted (a
    timer tick, a page fault) among hundreds does not make a cell look disturbed.

    Example:
        >>> deciles([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0])
        (2.0, 10.0)
        >>> deciles([4.0])
        (4.0, 4.0)
    """
    if len(times) < 2:
        return times[0], times[0]
    cuts = statistics.quantiles(times, n=10, method="inclusive")
    return cuts[0], cuts[-1]


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
    # Each result is kept until the next call's replaces it, as in ``out = step()`` in a loop
    # and as dualflow's cells keep theirs: a step then writes its output while the last one is
    # still alive, so both frameworks' allocators give a new buffer the same way.
    start = time.perf_counter()
    out = step()
    sync(out)
    first = time.perf_counter() - start
    for _ in range(warmup - 1):
        out = step()
        sync(out)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = step()
        sync(out)
        times.append(time.perf_counter() - start)
    p10, p90 = deciles(times)
    return {
        "median_ms": statistics.median(times) * 1e3,
        "p10_ms": p10 * 1e3,
        "p90_ms": p90 * 1e3,
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
    module, why = _load(framework)
    if module is None:
        return why
    if workload == PROBE:
        return {"probe": True, "mode": module.MODE, "version": module.VERSION}
    built = _built(module, framework, workload)
    if "step" not in built:
        return built
    try:
        result = time_step(*built.pop("step"), repeats, warmup)
    except Exception as exc:  # reported as the row's note, like a failed dualflow cell
        return _error(exc)
    return {**result, **built}


def _load(framework: str) -> tuple[Any, dict[str, Any]]:
    # (the framework's workloads module, {}), or (None, the skip/error record saying why not)
    if framework not in MODULES:
        return None, {"error": f"unknown peer framework {framework!r}"}
    try:
        importlib.import_module(framework)
    except ImportError as exc:
        return None, {"skip": f"{framework} is not importable by {sys.executable}: {exc}"}
    return _framework_module(framework), {}


def _built(module: Any, framework: str, workload: str) -> dict[str, Any]:
    # {"step": (step, sync), "mode", "version"}, or the skip/error record saying why not
    if workload not in module.WORKLOADS:
        return {"skip": f"no {framework} version of {workload}"}
    try:
        step = module.WORKLOADS[workload]()
    except Exception as exc:  # reported as the row's note, like a failed dualflow cell
        return _error(exc)
    return {"step": step, "mode": module.MODE, "version": module.VERSION}


def _error(exc: Exception) -> dict[str, Any]:
    return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}


def serve(framework: str, workload: str, warmup: int, lines: Any = sys.stdin) -> None:
    """Build the workload's step once, warm it up, print a marked ``{"ready": ...}`` line (or
    the record saying why not, as ``measure``'s), then answer each ``time N`` line read from
    ``lines`` with a marked ``{"times_ms": [...]}``: N calls timed one by one after an untimed
    one. Stops at
    ``quit`` or the input's end. The bench alternates these with its own calls
    (``peers/alternate.py``), so a ratio's two sides meet the same machine.

    Example:
        >>> serve("nope", "mlp", 1, ["time 2"])
        DUALFLOW_PEER_RESULT {"error": "unknown peer framework 'nope'"}
    """
    module, why = _load(framework)
    built = why if module is None else _built(module, framework, workload)
    if "step" not in built:
        print(MARKER + json.dumps(built), flush=True)
        return
    step, sync = built.pop("step")
    for _ in range(warmup):
        sync(step())
    print(MARKER + json.dumps({"ready": True, **built}), flush=True)
    for line in lines:
        words = line.split()
        if not words or words[0] == "quit":
            return
        out = step()  # one untimed call: the first after the bench's own block runs cold
        sync(out)
        times = []
        for _ in range(int(words[1])):
            start = time.perf_counter()
            out = step()
            sync(out)
            times.append((time.perf_counter() - start) * 1e3)
        del out
        print(MARKER + json.dumps({"times_ms": times}), flush=True)


def main(argv: list[str]) -> int:
    """Parse ``FRAMEWORK WORKLOAD REPEATS WARMUP``, measure, print the one marked line; or
    ``serve FRAMEWORK WORKLOAD WARMUP`` (``serve``).

    Example:
        >>> main(["nope", "mlp", "1", "1"])
        DUALFLOW_PEER_RESULT {"error": "unknown peer framework 'nope'"}
        0
    """
    if argv[0] == "serve":
        serve(argv[1], argv[2], int(argv[3]))
        return 0
    framework, workload, repeats, warmup = argv
    print(MARKER + json.dumps(measure(framework, workload, int(repeats), int(warmup))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
