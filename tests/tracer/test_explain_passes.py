"""Explanations (issue 19): ``explain(fn, passes=True)`` shows the graph after every pass in
process, and the max-traces warning reports the newest trace's guard value and line."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualflow
from dualflow import ops
from dualflow.graph_ir import print_graph
from dualflow.tracer.explain_passes import pass_graphs


def _step(x):
    y = ops.tanh(x) * 1.0 + x * x  # fold: `* 1.0` goes, multiply+add becomes fma
    return (y * 2.0).sum()


def test_explain_passes_prints_each_graph_after_every_pass() -> None:
    step = dualflow.compile(_step)
    x = dualflow.tensor(np.linspace(-1, 1, 64).astype(np.float32), requires_grad=True)
    text = str(dualflow.explain(step, x, passes=True))
    trace = step.history[-1]
    names = [s.name for s in trace.pass_stats]
    for label in ("forward", "backward"):
        assert f"  {label} graph as traced" in text
        for name in names:
            assert f"  {label} graph after pass {name}" in text
    # what the passes made in process is exactly the trace's graph (and the dump's files)
    stages = pass_graphs(trace.source_graph, names)
    assert [name for name, _ in stages] == ["input", *names]
    assert print_graph(stages[-1][1]) == print_graph(trace.graph)
    traced = print_graph(trace.source_graph)
    assert "multiply(%1, 1.0)" in traced and "fma(" not in traced
    assert "fma(" in print_graph(dict(stages)["fold"])  # fuse may then take it into a region
    assert "forward graph after pass fold (" in text  # fold changed it: printed, not "unchanged"
    line = _step.__code__.co_firstlineno + 1
    assert f"# test_explain_passes.py:{line}" in text  # the user's lines survive every pass


def test_explain_without_passes_keeps_the_short_report() -> None:
    step = dualflow.compile(_step)
    text = str(dualflow.explain(step, dualflow.tensor(np.ones(4, np.float32))))
    assert "after pass" not in text and "pass fold:" in text


def test_max_traces_warning_names_the_newest_traces_guard() -> None:
    def guarded(x):
        return x * x.sum().item()  # a guard on the value: fails for every new value

    fn = dualflow.compile(guarded, max_traces=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for value in (1.0, 2.0, 3.0):
            fn(dualflow.tensor([value]))
    line = guarded.__code__.co_firstlineno + 1
    where = f"test_explain_passes.py:{line}"
    assert fn.stats().retrace_reasons == [
        "first call",
        f"guard item() == 1.0 failed at {where} (this call: 2.0)",
    ]
    (warning,) = [w for w in caught if "from now on" in str(w.message)]
    # the third call missed the newest trace (made for 2.0), not the oldest (1.0)
    assert f"guard item() == 2.0 failed at {where} (this call: 3.0)" in str(warning.message)
    assert "(2 traces, max_traces=2)" in str(warning.message)


@pytest.mark.parametrize("passes", ["O0", "O1", "exact"])
def test_pass_graphs_follow_the_compiled_pipeline(passes: str) -> None:
    step = dualflow.compile(_step, passes=passes)
    step(dualflow.tensor(np.ones(8, np.float32)))
    trace = step.history[-1]
    stages = pass_graphs(trace.source_graph, [s.name for s in trace.pass_stats])
    assert print_graph(stages[-1][1]) == print_graph(trace.graph)
