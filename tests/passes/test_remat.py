"""The ``remat`` pass on graphs: its docstring example, the recompute mark (CSE, text and JSON
round trips), budget checks, the warning when a budget cannot be met, and random programs whose
results (interpreted and as memory-planned plans) never change."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import dualflow.passes.remat as remat
from dualflow.errors import ConfigError
from dualflow.graph_ir import GraphBuilder, parse_graph, print_graph, verify
from dualflow.graph_ir.builder import recomputing
from dualflow.graph_ir.json_format import graph_from_data, graph_to_data
from dualflow.passes.cse import cse
from dualflow.passes.manager import resolve_passes, run_passes
from dualflow.passes.remat import budget_passes, node_flops, planned_peak, report_of
from dualflow.runtime.plan import lower
from tests.passes.programs import assert_same_run, docstring_example, random_args
from tests.passes.test_random_programs import programs


def test_docstring_example_is_real_output_and_keeps_bits() -> None:
    before, after = docstring_example(remat)
    graph = parse_graph(before)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the budget is met: no warning
        result = remat.remat(graph, 0.8)
    assert print_graph(result) == after
    assert planned_peak(result) < planned_peak(graph)
    report = report_of(result)
    assert (report.before, report.after, report.extra_flops) == (68, 52, 4)
    assert "recompute exp -> %7" in "\n".join(report.lines())
    assert_same_run(graph, result, [np.array([0.5, -1.0, 2.0, -0.0], np.float32)], [])


def test_recompute_nodes_survive_cse_and_round_trips() -> None:
    b = GraphBuilder("f")
    x = b.input((4,), "float32", "x")
    (y,) = b.node("exp", [x])
    (t,) = b.node("tanh", [y])
    with recomputing():
        (again,) = b.node("exp", [x])
    (z,) = b.node("multiply", [t, again])
    b.output(z)
    graph = b.build()
    assert cse(graph) is graph  # the recompute exp is not merged into the forward one
    text = print_graph(graph)
    assert "= recompute exp(%0)" in text
    assert [n.recompute for n in parse_graph(text).nodes] == [False, False, True, False]
    data = graph_to_data(graph)
    assert [n.recompute for n in graph_from_data(data, {}).nodes] == [False, False, True, False]
    del data["nodes"][2][5:]  # a plan stored before the mark existed reads as unmarked
    assert not any(n.recompute for n in graph_from_data(data, {}).nodes)
    twin = parse_graph(text.replace("= recompute exp", "= exp"))
    assert len(cse(twin).nodes) == 3  # unmarked, the two are merged


@pytest.mark.parametrize("bad", [0, -5, 1.5, 0.0, "half", True, None])
def test_bad_budgets_are_config_errors_naming_the_setting(bad) -> None:
    if bad is None:
        assert budget_passes(None) == ()
        return
    with pytest.raises(ConfigError, match="memory_budget"):
        budget_passes(bad)
    with pytest.raises(ConfigError, match="remat"):
        resolve_passes(f"O1,remat={bad!r}")


def test_pass_arguments_in_pipeline_specs() -> None:
    assert resolve_passes("O1,remat=0.5") == ("dce", "cse", "remat=0.5")
    assert resolve_passes(("remat=4096",)) == ("remat=4096",)
    with pytest.raises(ConfigError, match="takes no argument"):
        resolve_passes("dce=3")
    graph = parse_graph(docstring_example(remat)[0])
    out, stats = run_passes(graph, "remat=0.8", verify_each=True)
    assert [s.name for s in stats] == ["remat=0.8"] and out is not graph
    assert run_passes(graph, "remat")[0] is graph  # no budget: nothing to do


def test_a_budget_that_cannot_be_met_warns_with_the_peak_achieved() -> None:
    graph = parse_graph(docstring_example(remat)[0])
    with pytest.warns(
        RuntimeWarning,
        match=r"cannot be met; the planned peak is 52 B after recomputing 1 values \(68 B before",
    ):
        result = remat.remat(graph, 0.1)
    assert report_of(result).after == 52
    assert remat.remat(graph, 10**9) is graph  # fits already


def _planned_run(graph, inputs, state):
    result = lower(graph).run([a.copy() for a in inputs], [s.copy() for s in state])
    return list(result.outputs) + list(result.updates or ())


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.sampled_from([0.1, 0.3, 0.6, 1.0, 64]), st.integers(0, 2**16))
def test_remat_never_changes_results(graph, budget, seed: int) -> None:
    inputs, state = random_args(graph, seed)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # small graphs rarely meet a budget
        for pipeline in ((f"remat={budget!r}",), ("fold", "cse", "dce", f"remat={budget!r}")):
            base, _ = run_passes(graph, pipeline[:-1])
            out, _ = run_passes(graph, pipeline, verify_each=True)
            verify(out)
            assert_same_run(graph, out, inputs, state)
            marked = sum(n.recompute for n in out.nodes)
            event(f"recompute nodes: {min(marked, 2)}")
            assert sum(n.recompute for n in cse(out).nodes) == marked  # copies stay apart
            report = report_of(out)  # counted on the final graph, rewired copies included
            assert len(report.recomputed) == marked - sum(n.recompute for n in base.nodes)
            flops = sum(map(node_flops, out.nodes)) - sum(map(node_flops, base.nodes))
            assert report.extra_flops == flops and report.after == planned_peak(out)
            planned = zip(_planned_run(out, inputs, state), _planned_run(base, inputs, state))
            for got, want in planned:
                np.testing.assert_array_equal(got, want)
