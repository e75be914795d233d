"""The pass manager: pipelines, stats, dumps, verification and error reporting."""

from __future__ import annotations

import itertools
import sys
import types

import pytest

import dualflow
from dualflow.errors import CompileError
from dualflow.graph_ir import Graph, parse_graph, print_graph
from dualflow.passes import O0, O1, O2, PASSES, PIPELINES, resolve_passes, run_passes
from dualflow.passes import manager as manager_module
from tests.passes.programs import mlp_step


def test_pipelines_are_explicit_tuples() -> None:
    assert O0 == () and O1 == ("dce", "cse")
    assert O2[:5] == ("fold_bn", "fold", "slice_grads", "cse", "dce")
    assert resolve_passes("O0") == () and resolve_passes(("cse",)) == ("cse",)
    assert resolve_passes(" fold , dce ") == ("fold", "dce")


def test_unknown_pass_names_are_rejected_with_the_known_ones() -> None:
    with pytest.raises(
        ValueError, match=r"unknown pass.*'nope'.*known passes: \['bucket_allreduce', 'cse', 'dce'"
    ):
        resolve_passes("dce,nope")
    with pytest.raises(ValueError, match="O3"):
        run_passes(mlp_step(), "O3")


def test_env_passes_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUALFLOW_PASSES", "cse,dce")
    assert resolve_passes(None) == ("cse", "dce")
    _, stats = run_passes(mlp_step(), None, verify_each=True)
    assert [s.name for s in stats] == ["cse", "dce"]
    monkeypatch.delenv("DUALFLOW_PASSES")
    assert resolve_passes(None) == O2


def test_exact_pipeline_from_compile_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    exact = PIPELINES["exact"]
    assert "fold_bn" not in exact and "fuse" not in exact and "fuse_exact" in exact
    assert dualflow.compile(lambda x: x, passes="exact").passes == exact
    monkeypatch.setenv("DUALFLOW_PASSES", "exact")
    assert resolve_passes(None) == exact
    assert dualflow.compile(lambda x: x).passes == exact


def test_stats_are_recorded() -> None:
    graph = mlp_step()
    out, stats = run_passes(graph, "O2", verify_each=True)
    assert [s.name for s in stats] == list(O2)
    assert stats[0].nodes_before == len(graph) and stats[-1].nodes_after == len(out)
    for before, after in itertools.pairwise(stats):
        assert after.nodes_before == before.nodes_after
    assert all(s.seconds >= 0 for s in stats)
    # fold_bn finds no batch norm; fold drops the multiply-by-one (float32[4,5]); slice_grads
    # finds no split; cse and dce each drop a float32[4,2]
    assert [s.bytes_removed for s in stats][:5] == [0, 80, 0, 32, 32]
    assert run_passes(graph, "O0")[0] is graph


def test_dump_directory(tmp_path) -> None:
    graph = mlp_step()
    out, _ = run_passes(graph, "O2", verify_each=True, dump_dir=tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["00-input.graph"] + [f"{i:02d}-{n}.graph" for i, n in enumerate(O2, 1)]
    assert (tmp_path / "00-input.graph").read_text() == print_graph(graph) + "\n"
    assert (
        parse_graph((tmp_path / f"{len(O2):02d}-{O2[-1]}.graph").read_text()).nodes[-1].op
        == out.nodes[-1].op
    )


def test_dump_directory_from_env(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUALFLOW_DUMP_IR", str(tmp_path / "ir"))
    run_passes(mlp_step(), "O1")
    assert sorted(p.name for p in (tmp_path / "ir").iterdir()) == [
        "00-input.graph",
        "01-dce.graph",
        "02-cse.graph",
    ]


def _drop_first_node(graph: Graph) -> Graph:
    return graph.replace(nodes=graph.nodes[1:])  # its outputs are used later: invalid IR


def _explode(graph: Graph) -> Graph:
    raise RuntimeError("boom")


@pytest.mark.parametrize("broken, message", [(_drop_first_node, "invalid"), (_explode, "boom")])
def test_a_broken_pass_is_named(monkeypatch: pytest.MonkeyPatch, broken, message: str) -> None:
    monkeypatch.setitem(PASSES, "broken", broken)
    with pytest.raises(CompileError) as info:
        run_passes(mlp_step(), ("dce", "cse", "broken"), verify_each=True)
    text = str(info.value)
    assert "'broken'" in text and "['dce', 'cse']" in text and message in text


def test_verification_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PASSES, "broken", _drop_first_node)
    monkeypatch.delenv("DUALFLOW_VERIFY_PASSES", raising=False)  # tests/conftest.py sets it
    run_passes(mlp_step(), ("broken",))  # not verified: no error
    monkeypatch.setenv("DUALFLOW_VERIFY_PASSES", "1")
    with pytest.raises(CompileError, match="broken"):
        run_passes(mlp_step(), ("broken",))


def test_a_pass_returning_a_non_graph_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PASSES, "broken", lambda g: list(g.nodes))
    with pytest.raises(CompileError, match=r"'broken'.*not a Graph"):
        run_passes(mlp_step(), ("broken",))


def test_every_pass_is_registered() -> None:
    assert set(manager_module.PASSES) >= {"dce", "cse", "fold"}
    assert set(O1) | set(O2) <= set(PASSES)


def test_a_new_pass_is_one_module_named_like_its_function(monkeypatch: pytest.MonkeyPatch) -> None:
    """``dualflow/passes/<name>.py`` defining ``<name>(graph)`` is all the manager needs: a
    pipeline (or ``passes=``) naming it loads it (here a stand-in module)."""
    seen: list[int] = []

    def count_nodes(graph: Graph) -> Graph:
        seen.append(len(graph))
        return graph

    module = types.ModuleType("dualflow.passes.count_nodes")
    module.count_nodes = count_nodes
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(manager_module, "PASSES", dict(PASSES))
    assert resolve_passes("dce,count_nodes") == ("dce", "count_nodes")
    graph = mlp_step()
    out, stats = run_passes(graph, ("dce", "count_nodes"), verify_each=True)
    assert [s.name for s in stats] == ["dce", "count_nodes"] and seen == [len(out)]
    assert manager_module.load_pass("rules") is None  # a module of passes/ that is no pass
    assert all(manager_module.load_pass(name) is PASSES[name] for name in PASSES)
