"""``build_plan``: passes then lowering, the one way every compiled graph becomes a plan.

Tracing a call, tracing its backward and loading a stored trace all go through it, so they get
the same passes, the same debug option and the same dump folders. In debug mode the plan also
keeps the graph as it was before fusion, so a fused step that produces NaN/Inf can be re-run
op by op to name the exact op and line (``runtime/plan.py``).
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

from dualflow._config import user_path
from dualflow.device import Device
from dualflow.graph_ir.ir import Graph
from dualflow.passes.manager import PassStats, run_passes
from dualflow.runtime.plan import Plan, lower

_DUMPS = itertools.count()


def _dump_dir(name: str) -> Path | None:
    """One folder per compiled graph under ``DUALFLOW_DUMP_IR`` (graphs never overwrite)."""
    root = os.environ.get("DUALFLOW_DUMP_IR")
    if not root:
        return None
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:80]
    return user_path(root) / f"{next(_DUMPS):03d}-{safe}"


def build_plan(
    graph: Graph,
    passes: Any,
    device: Device | str = "cpu",
    *,
    debug: bool = False,
    donate: bool = False,
) -> tuple[Graph, Plan, list[PassStats]]:
    """Run ``passes`` over ``graph`` and lower the result; returns (graph, plan, pass stats).

    Example:
        >>> from dualflow.graph_ir import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2,), "float32"); b.output(*b.node("exp", [x]))
        >>> graph, plan, stats = build_plan(b.build(), "O1")
        >>> plan.steps, [s.name for s in stats]
        (1, ['dce', 'cse'])
    """
    dump = _dump_dir(graph.name)
    result, stats = run_passes(graph, passes, dump_dir=dump, device=device)
    unfused = None
    names = [s.name for s in stats]
    if debug and "fuse" in names:  # same passes without fuse: the values keep their ids
        unfused, _ = run_passes(graph, [n for n in names if n != "fuse"], device=device)
    plan = lower(result, device, debug=debug, donate=donate, unfused=unfused)
    return result, plan, stats
