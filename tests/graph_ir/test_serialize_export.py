"""``save``/``load`` round trips (and a loaded graph runs in a fresh process without the eager
machinery); damaged files raise CheckpointError; ``to_networkx`` and ``to_dot`` describe the graph.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dualflow.errors import CheckpointError
from dualflow.graph_ir import interpret, load, print_graph, save, to_dot, to_networkx, verify
from dualflow.runtime import lower
from tests.graph_ir.graphs import everything, everything_inputs

ROOT = str(Path(__file__).resolve().parents[2])


def test_save_load_round_trip(tmp_path: Path) -> None:
    graph = everything()
    inputs, state = everything_inputs()
    paths = save(graph, str(tmp_path / "step"), state)
    assert [os.path.basename(p) for p in paths] == ["step.graph", "step.npz"]
    loaded, loaded_state = load(str(tmp_path / "step"))
    assert print_graph(loaded) == print_graph(graph)
    verify(loaded)
    for a, b in zip(loaded.consts.values(), graph.consts.values()):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype
    assert len(loaded_state) == 1
    np.testing.assert_array_equal(loaded_state[0], state[0])
    want = interpret(graph, inputs, state)
    got = lower(loaded).run(inputs, loaded_state)
    for g, w in zip(got.outputs, want.outputs):
        np.testing.assert_array_equal(g, w)
    assert not list(tmp_path.glob(".tmp-*"))  # atomic writes leave no temporaries


def test_save_without_state_loads_none(tmp_path: Path) -> None:
    save(everything(), str(tmp_path / "g"))
    assert load(str(tmp_path / "g"))[1] is None


def test_damaged_files_raise_checkpoint_error(tmp_path: Path) -> None:
    base = str(tmp_path / "g")
    save(everything(), base)
    with pytest.raises(CheckpointError, match="cannot read"):
        load(str(tmp_path / "missing"))
    text = Path(base + ".graph").read_text()
    Path(base + ".graph").write_text(text.replace("= exp", "= exp(").replace("return", "retur n"))
    with pytest.raises(CheckpointError, match="not a valid graph"):
        load(base)
    Path(base + ".graph").write_text(text)
    np.savez(base + ".npz")  # the constants are gone
    with pytest.raises(CheckpointError, match="lacks constants"):
        load(base)
    Path(base + ".npz").write_bytes(b"not a zip file")
    with pytest.raises(CheckpointError):
        load(base)


RUN_SAVED = """
import json, sys
import numpy as np
{prelude}
from dualflow.graph_ir import load
from dualflow.runtime import lower
graph, state = load(sys.argv[1])
inputs = [np.load(sys.argv[2])["x"], np.load(sys.argv[2])["labels"]]
result = lower(graph).run(inputs, state)
np.savez(sys.argv[3], *result.outputs, *result.updates)
print(json.dumps(sorted(m for m in sys.modules if m.startswith("dualflow"))))
"""

# Import the layers without running dualflow/__init__.py (which imports everything).
BARE_PACKAGE = (
    "import types; pkg = types.ModuleType('dualflow'); pkg.__path__ = [{root!r} + '/dualflow']; "
    "sys.modules['dualflow'] = pkg"
)


def _run_saved(tmp_path: Path, prelude: str) -> tuple[list[np.ndarray], list[str]]:
    graph = everything()
    inputs, state = everything_inputs()
    save(graph, str(tmp_path / "step"), state)
    np.savez(tmp_path / "inputs.npz", x=inputs[0], labels=inputs[1])
    script = RUN_SAVED.format(prelude=prelude)
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            str(tmp_path / "step"),
            str(tmp_path / "inputs.npz"),
            str(tmp_path / "out.npz"),
        ],
        capture_output=True,
        text=True,
        cwd=str(tmp_path),
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert out.returncode == 0, out.stderr
    with np.load(tmp_path / "out.npz") as data:
        arrays = [data[f"arr_{i}"] for i in range(len(data.files))]
    want = interpret(graph, inputs, state)
    expected = list(want.outputs) + [want.state[0]]
    assert len(arrays) == len(expected)
    for got, w in zip(arrays, expected):
        np.testing.assert_array_equal(got, w)
    return arrays, json.loads(out.stdout)


def test_saved_graph_runs_in_a_fresh_process_from_the_layers_alone(tmp_path: Path) -> None:
    _, modules = _run_saved(tmp_path, BARE_PACKAGE.format(root=ROOT))
    for eager in ("dualflow.tensor.core", "dualflow.autograd", "dualflow.tracer", "dualflow.nn"):
        assert eager not in modules, modules


def test_saved_graph_runs_in_a_fresh_process_without_the_eager_machinery(tmp_path: Path) -> None:
    _, modules = _run_saved(tmp_path, "")
    assert "dualflow.tensor.core" not in modules, modules


def test_to_networkx_counts_and_attributes() -> None:
    graph = everything()
    dag = to_networkx(graph)
    values = 2 + 1 + 1 + sum(len(n.outputs) for n in graph.nodes)  # inputs, state, const, outs
    assert dag.number_of_nodes() == values + len(graph.nodes)
    edges = sum(len(n.value_inputs) + len(n.outputs) for n in graph.nodes)
    assert dag.number_of_edges() == edges
    assert dag.nodes["%0"]["kind"] == "input" and dag.nodes["%2"]["kind"] == "state"
    assert dag.nodes["%3"]["kind"] == "const"
    assert dag.nodes["n7:batch_norm"]["loc"] == "m.py:8"
    assert dag.out_degree("n7:batch_norm") == 3
    import networkx as nx

    assert nx.is_directed_acyclic_graph(dag)


def test_to_dot_text() -> None:
    graph = everything()
    text = to_dot(graph)
    lines = text.splitlines()
    assert lines[0] == 'digraph "everything" {' and lines[-1] == "}"
    assert '  "n7" [shape=box, label="batch_norm"];' in lines
    assert '  "%0" [label="x\\n%0 float64[2, 4]"];' in lines
    assert sum(" -> " in line for line in lines) == sum(
        len(n.value_inputs) + len(n.outputs) for n in graph.nodes
    )
