"""The graph after every pass, for ``dualflow.explain(fn, passes=True)``.

A trace keeps its graph as traced (``source_graph``); the pass manager is run over it once more
with ``keep=`` collecting what it produces after each pass, the same graphs ``DUALFLOW_DUMP_IR``
writes to files. Passes are deterministic, so the last one printed is the trace's graph.
"""

from __future__ import annotations

from typing import Any

from dualflow.graph_ir.ir import Graph
from dualflow.graph_ir.printer import print_graph
from dualflow.passes.manager import run_passes


def pass_graphs(source: Graph, names: list[str]) -> list[tuple[str, Graph]]:
    """``[("input", source), (pass, graph after it), ...]`` for the pipeline ``names``.

    Example:
        >>> from dualflow.graph_ir import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2,), "float32")
        >>> _ = b.node("exp", [x]); b.output(x)
        >>> [(name, len(g.nodes)) for name, g in pass_graphs(b.build(), ["dce", "cse"])]
        [('input', 1), ('dce', 0), ('cse', 0)]
    """
    stages: list[tuple[str, Graph]] = []
    run_passes(source, names, dump_dir="", keep=stages)
    return stages


def describe_passes(trace: Any) -> list[str]:
    """Lines showing the forward (and backward) graph as traced and after each pass."""
    names = [st.name for st in trace.pass_stats]
    backward = trace.backward.source_graph if trace.backward is not None else None
    if trace.source_graph is None:
        return ["  graphs after each pass: not kept (the trace was loaded from the plan cache)"]
    lines = []
    for label, source in (("forward", trace.source_graph), ("backward", backward)):
        if source is None:
            continue
        previous = None
        for name, graph in pass_graphs(source, names):
            title = "as traced" if name == "input" else f"after pass {name}"
            if graph is previous:
                lines.append(f"  {label} graph {title}: unchanged")
                continue
            lines.append(f"  {label} graph {title} ({len(graph.nodes)} nodes):")
            lines.append("    " + print_graph(graph).replace("\n", "\n    "))
            previous = graph
    return lines
