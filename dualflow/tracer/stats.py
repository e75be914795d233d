"""``Stats``: the counters of one compiled function, as ``fn.stats()`` and ``explain`` show them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Stats:
    """Counters of one compiled function (``fn.stats()``)."""

    calls: int = 0
    traces: int = 0
    plan_runs: int = 0
    guard_failures: int = 0
    eager_fallbacks: int = 0  # calls the fast path left to eager or lazy re-execution
    step_errors: int = 0  # plan runs a step's error stopped (the call re-ran eagerly)
    compile_seconds: float = 0.0
    cache_loads: int = 0  # traces loaded from the plan cache on disk instead of traced
    cache_stores: int = 0
    load_seconds: float = 0.0
    retrace_reasons: list[str] = field(default_factory=list)
    lazy_calls: int = 0  # calls run by lazy re-execution (Python at every call, ops as plans)
    lazy_segments: int = 0  # recorded segments those calls ran (one, plus one per graph break)
    lazy_plan_segments: int = 0  # of them, run by a compiled plan (others: op by op, first seen)
    lazy_plan_ops: int = 0  # ops those calls recorded that plans ran
    lazy_eager_calls: int = 0  # of the lazy path's calls, those run eagerly (measured faster)
    lazy_eager_ops: int = 0  # ops they ran eagerly (first sightings, views, collectives...)
    graph_breaks: int = 0  # segments ended because Python needed a value (print, .item())
    dynamic_plans: int = 0  # plans built from a trace with dynamic sizes for new sizes (issue 39)
