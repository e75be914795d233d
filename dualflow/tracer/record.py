"""``Trace``: one specialization of a compiled function, as the call path and explain see it.

It is its own module because two producers make traces: tracing a call (``compiled``) and
loading a stored plan from disk (``plan_cache``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dualflow.graph_ir.ir import Graph
from dualflow.passes.manager import PassStats
from dualflow.runtime.plan import Plan
from dualflow.tracer.autodiff import Backward
from dualflow.tracer.state import StateChecks


@dataclass
class Trace:
    """One specialization: the graph, its plan, and what must hold to reuse it."""

    graph: Graph
    plan: Plan
    checks: StateChecks
    update_slots: list[int]
    grad_owners: list[tuple[str, Any]]  # outputs after the user's: new .grad of these slots
    grads_to_none: list[tuple[str, Any]]  # ("state", tensor) or ("input", flat position)
    rebuild: Callable[[list[Any]], Any]
    n_outputs: int
    described: list[tuple[str, Any]]
    reason: str
    compile_seconds: float
    backward: Backward | None = None
    input_updates: list[int] = field(default_factory=list)  # argument positions written
    const_outputs: list[int] = field(default_factory=list)  # user outputs that are constants
    pass_stats: list[PassStats] = field(default_factory=list)  # what each pass did
    cache_note: str = ""  # what the plan cache did with it (stored, loaded, or why not)
